import type { WorkflowHandle } from '@temporalio/client';
import { afterEach } from 'vitest';
import { ensureConnectionWorkflow } from '../../temporal/client';
import type { ConnectionState, ConnectionWorkflow } from '../../temporal/connection';
import { connectionWorkflowId } from '../../temporal/ids';
import { waitForState } from './connection-state';
import type { Servers } from './stack';

/** What a file testing connection workflows on its own servers uses (see useConnectionWorkflows). */
export interface ConnectionWorkflows {
  /**
   * Inserts a demo connection of tenant `acme` (app key `<prefix><n>`, created at the server's
   * time) with `sync` as its schedule (15 minutes by default) and `config` over the file's
   * default config, and starts its workflow, which is terminated once the test has ended.
   */
  newConnection(opts?: { sync?: Record<string, unknown>; config?: Record<string, unknown> }): Promise<{ id: string; handle: WorkflowHandle<ConnectionWorkflow> }>;
  /** Has the connection workflow of `connectionId` (one the test started itself) terminated once the test has ended. */
  terminateAfterTest(connectionId: string): void;
  /** The sync jobs of a connection, oldest first. */
  jobs(connectionId: string): Promise<any[]>;
  /** Waits (real time, no skipping) until the idle workflow's state satisfies `ok`; says the connection's jobs if it never does. */
  waitForState(connectionId: string, ok: (s: ConnectionState) => boolean): Promise<ConnectionState>;
}

/**
 * Registers an afterEach hook that terminates the connection workflows each test started, so
 * time skips only for the next test's, and returns what such a test file needs to start them and
 * read their jobs and state. `config` gives a connection's default config from its app key.
 */
export function useConnectionWorkflows(
  stack: Servers,
  taskQueue: string,
  opts: { prefix?: string; config?: (appKey: string) => Record<string, unknown> } = {},
): ConnectionWorkflows {
  const started: string[] = [];
  afterEach(async () => {
    for (const id of started.splice(0)) {
      await stack.env.client.workflow.getHandle(connectionWorkflowId(id)).terminate('test done').catch(() => undefined);
    }
  });

  let seq = 0;
  const jobs = async (connectionId: string) => {
    const { rows } = await stack.db.pool.query(
      `select id, job_type, trigger, status, scheduled_at, started_at, finished_at, last_error, abandoned_at, workflow_id
         from sync_jobs where connection_id = $1 order by created_at, scheduled_at`,
      [connectionId],
    );
    return rows;
  };
  return {
    async newConnection({ sync = { interval_seconds: 900 }, config = {} } = {}) {
      seq += 1;
      const appKey = `${opts.prefix ?? 'app'}${seq}`;
      const { rows } = await stack.db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, config, metadata, created_at)
         values ('acme', 'demo', $1, $2, $3, $4) returning id`,
        [appKey, { ...opts.config?.(appKey), ...config }, { sync }, new Date(await stack.env.currentTimeMs())],
      );
      const id = rows[0]!.id;
      started.push(id);
      const handle = await ensureConnectionWorkflow(stack.env.client, taskQueue, { id, tenantId: 'acme', providerSlug: 'demo' });
      return { id, handle };
    },
    terminateAfterTest(connectionId) {
      started.push(connectionId);
    },
    jobs,
    waitForState: (connectionId, ok) =>
      waitForState(stack.env, connectionId, ok, async () => ({ jobs: (await jobs(connectionId)).map((j) => `${j.job_type}/${j.trigger}/${j.status}`) })),
  };
}
