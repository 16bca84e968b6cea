import { WorkflowNotFoundError, type Client, type WorkflowHandle } from '@temporalio/client';
import type { connectionWorkflow } from '../workflows/connection';
import { connectionWorkflowId, RECONCILE_WORKFLOW_ID, syncJobWorkflowId } from '../workflows/ids';
import type { syncJobWorkflow } from '../workflows/sync-job';
import type { reconcileWorkflow } from '../workflows/reconcile';
import { CONNECTION_ID, PROVIDER, TENANT_ID } from '../workflows/search-attributes';

/** The identity of a connection, as its workflow's search attributes show it. */
export interface ConnectionRef {
  id: string;
  tenantId: string;
  providerSlug: string;
}

/**
 * Starts the connection's workflow, or returns the running one (conflict policy "use existing"),
 * so every caller (API create, reconcile tick, any number at once) can simply ensure it.
 */
export async function ensureConnectionWorkflow(
  client: Client,
  taskQueue: string,
  connection: ConnectionRef,
): Promise<WorkflowHandle<typeof connectionWorkflow>> {
  return client.workflow.start<typeof connectionWorkflow>('connectionWorkflow', {
    workflowId: connectionWorkflowId(connection.id),
    taskQueue,
    args: [{ connectionId: connection.id }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: [
      { key: CONNECTION_ID, value: connection.id },
      { key: TENANT_ID, value: connection.tenantId },
      { key: PROVIDER, value: connection.providerSlug },
    ],
  });
}

/**
 * Cancels the running workflow of a connection (disabled connections): the workflow cancels its
 * queued or running job and completes. Returns false when none was running.
 */
export async function stopConnectionWorkflow(client: Client, connectionId: string): Promise<boolean> {
  const handle = client.workflow.getHandle(connectionWorkflowId(connectionId));
  try {
    const description = await handle.describe();
    if (description.status.name !== 'RUNNING') return false;
    await handle.cancel();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/**
 * Starts the `sync-job:<id>` workflow of a job requested over the API (it runs beside the
 * connection's scheduler, not as its child), or returns the running one, so a repeated or
 * concurrent request, and the reconcile tick adopting an orphaned job, all simply ensure it.
 */
export async function ensureJobWorkflow(
  client: Client,
  taskQueue: string,
  job: { id: string; connection: ConnectionRef },
): Promise<WorkflowHandle<typeof syncJobWorkflow>> {
  return client.workflow.start<typeof syncJobWorkflow>('syncJobWorkflow', {
    workflowId: syncJobWorkflowId(job.id),
    taskQueue,
    args: [{ jobId: job.id, connectionId: job.connection.id }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: [
      { key: CONNECTION_ID, value: job.connection.id },
      { key: TENANT_ID, value: job.connection.tenantId },
      { key: PROVIDER, value: job.connection.providerSlug },
    ],
  });
}

/** Starts the namespace's reconcile-tick workflow unless it is already running. */
export async function ensureReconcileWorkflow(
  client: Client,
  taskQueue: string,
  tickSeconds: number,
  retentionDays: number,
): Promise<void> {
  await client.workflow.start<typeof reconcileWorkflow>('reconcileWorkflow', {
    workflowId: RECONCILE_WORKFLOW_ID,
    taskQueue,
    args: [{ tickSeconds, retentionDays }],
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}
