// The demo connector the tests' setup registers (test/setup-demo-connector.ts), recording its
// fetch log, with its worlds, log and failure counters under the names the tests use.
import { createDemoConnector, type DemoWorld } from '../../connectors/demo';
import type { ConnectorRecord } from '../../connectors/types';

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
