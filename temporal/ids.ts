// Deterministic workflow ids: one connection workflow per connection, one job workflow per job.
import { connectionPurgeWorkflowId } from './purge';

/** Workflow id of a connection's long-running scheduler workflow. */
export const connectionWorkflowId = (connectionId: string): string => `connection:${connectionId}`;

/** Workflow id of the workflow that runs one requested sync job (a scheduled one runs in its connection's). */
export const syncJobWorkflowId = (jobId: string): string => `sync-job:${jobId}`;

/**
 * Workflow id of the immediate sync of a connection: one id per connection, so Temporal itself
 * refuses a second one while one runs (a closed one's id is reused by the next).
 */
export const immediateSyncWorkflowId = (connectionId: string): string => `immediate-sync:${connectionId}`;

/** Workflow id of the single reconcile-tick workflow of a namespace. */
export const RECONCILE_WORKFLOW_ID = 'synctide-reconcile';

/** Workflow id of the delivery of one webhook event to one endpoint. */
export const webhookDeliveryWorkflowId = (deliveryId: string): string => `webhook-delivery:${deliveryId}`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The uuid after `prefix` in `workflowId`; null when it does not start so or names no uuid. */
function idAfter(prefix: string, workflowId: string): string | null {
  const id = workflowId.startsWith(prefix) ? workflowId.slice(prefix.length) : '';
  return UUID.test(id) ? id : null;
}

/** The delivery id a `webhook-delivery:<uuid>` workflow id names; null for any other workflow id. */
export function deliveryIdOf(workflowId: string): string | null {
  return idAfter(webhookDeliveryWorkflowId(''), workflowId);
}

/** The purge id a `connection-purge:<uuid>` workflow id names; null for any other workflow id. */
export function purgeIdOf(workflowId: string): string | null {
  return idAfter(connectionPurgeWorkflowId(''), workflowId);
}

/** The connection id a `connection:<uuid>` workflow id names; null for any other workflow id. */
export function connectionIdOf(workflowId: string): string | null {
  return idAfter(connectionWorkflowId(''), workflowId);
}
