import proto from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { ConnectionState } from '../../temporal/connection';
import { connectionWorkflowId } from '../../temporal/ids';
import { eventually } from './worker';

const { EventType } = proto.temporal.api.enums.v1;

/**
 * Queries a connection workflow only while its run is idle: running, with no workflow task,
 * activity or child in flight. The time-skipping server can leave a query unanswered when it
 * lands on a run that is just continuing as new, and that stuck query then blocks time skipping
 * for the whole file.
 */
export async function queryIdle(env: TestWorkflowEnvironment, connectionId: string): Promise<ConnectionState | undefined> {
  const handle = env.client.workflow.getHandle(connectionWorkflowId(connectionId));
  const description = await handle.describe().catch(() => undefined);
  if (description?.status.name !== 'RUNNING') return undefined;
  if (description.raw.pendingActivities?.length || description.raw.pendingChildren?.length) return undefined;
  const events = (await handle.fetchHistory().catch(() => undefined))?.events ?? [];
  const lastType = events[events.length - 1]?.eventType;
  if (lastType === EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED || lastType === EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED) {
    return undefined;
  }
  return handle.query<ConnectionState>('state').catch(() => undefined);
}

/** Waits (real time, no skipping) until the idle workflow's state satisfies `ok`. */
export function waitForState(
  env: TestWorkflowEnvironment,
  connectionId: string,
  ok: (s: ConnectionState) => boolean,
  describe?: () => Promise<unknown>,
): Promise<ConnectionState> {
  return eventually(
    async () => {
      const s = await queryIdle(env, connectionId);
      return s && ok(s) ? s : undefined;
    },
    {
      describe: async () => ({
        state: await queryIdle(env, connectionId),
        time: new Date(await env.currentTimeMs()).toISOString(),
        ...(describe ? { more: await describe() } : {}),
      }),
    },
  );
}
