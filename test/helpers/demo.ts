// The demo connector the tests' setup registers (test/setup-demo-connector.ts), recording its
// fetch log, with its worlds, log and failure counters under the names the tests use.
import { createDemoConnector, type DemoWorld } from '../../connectors/demo';
import type { ConnectorRecord } from '../../connectors/types';
import type { Pool } from '../../db/pool';

/** The registered demo connector of this test file's process. */
export const demoConnector = createDemoConnector();
demoConnector.recordFetches(true);

/** Its worlds (a config's `world` key names one). */
export const demoWorlds = demoConnector.worlds;
/** Its fetch log (emptied in place by `resetDemoFetchLog`). */
export const demoFetchLog = demoConnector.fetchLog;

export const createDemoWorld = (id: string): DemoWorld => demoConnector.createWorld(id);
export const resetDemoFetchLog = (): void => demoConnector.resetFetchLog();
export const resetDemoFailures = (): void => demoConnector.resetFailures();
export const recordDemoFetches = (on: boolean, limit?: number): void => demoConnector.recordFetches(on, limit);
/** `demoRecords` with this connector's worlds. */
export const demoRecords = (config: Record<string, unknown>, resource: string, since: Date | null = null, until: Date | null = null): ConnectorRecord[] =>
  demoConnector.records(config, resource, since, until);

/**
 * Demo connections of tenant `acme` written straight to the database of `pool()` (app keys
 * `<prefix>-1`, `<prefix>-2`, …, an hourly schedule), and a connection's config replaced in place.
 */
export function demoConnectionRows(pool: () => Pool, prefix: string) {
  let seq = 0;
  return {
    async insert(config: Record<string, unknown>): Promise<string> {
      seq += 1;
      const { rows } = await pool().query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, config, metadata)
         values ('acme', 'demo', $1, $2, '{"sync": {"interval_seconds": 3600}}') returning id`,
        [`${prefix}-${seq}`, config],
      );
      return rows[0]!.id;
    },
    setConfig: (id: string, config: Record<string, unknown>) => pool().query('update connections set config = $2 where id = $1', [id, config]),
  };
}
