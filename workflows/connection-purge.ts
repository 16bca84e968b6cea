// A connection purge: first everything the connection runs is stopped (its workflow, its jobs'
// workflows) and found closed, then its rows are deleted in short batches until the connection
// row itself is gone. Visible as `connection-purge:<purge_id>`; progress is in `connection_purges`.
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../temporal/activities';
import type { ConnectionPurgeInput, ConnectionPurgeWorkflow } from '../temporal/purge';

const { quiesceConnection } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  // Retried until the connection's workflows have closed (a running sync stops at its next heartbeat).
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});
const { purgeConnectionBatch } = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** Stops the connection's work, then deletes its rows batch by batch; returns how many rows went. */
export async function connectionPurgeWorkflow(input: ConnectionPurgeInput): Promise<{ deleted: number }> {
  await quiesceConnection(input);
  let deleted = 0;
  for (;;) {
    const progress = await purgeConnectionBatch(input);
    deleted += progress.deleted;
    if (progress.done) return { deleted };
  }
}

connectionPurgeWorkflow satisfies ConnectionPurgeWorkflow;
