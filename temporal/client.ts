// Typed client helpers: how the API, the reconcile tick and the workers start, signal and stop
// Synctide's workflows. Typed by the contract modules beside this one, never by workflow code.
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, isGrpcServiceError, type Client, type Connection, type WorkflowHandle } from '@temporalio/client';
import type { SignalDefinition } from '@temporalio/common';
import { decodeFromPayloadsAtIndex } from '@temporalio/common/lib/internal-non-workflow';
import { CONNECTION_WORKFLOW, stateQuery, type ConnectionState, type ConnectionWorkflow, type ConnectionWorkflowInput } from './connection';
import { connectionWorkflowId, immediateSyncWorkflowId, RECONCILE_WORKFLOW_ID, syncJobWorkflowId, webhookDeliveryWorkflowId } from './ids';
import {
  IMMEDIATE_SYNC_PRIORITY,
  IMMEDIATE_SYNC_WORKFLOW,
  type ImmediateSyncInput,
  type ImmediateSyncProgress,
  type ImmediateSyncWorkflow,
} from './immediate-sync';
import { RECONCILE_WORKFLOW, type ReconcileWorkflow } from './reconcile';
import { CONNECTION_ID, PHASE, PROVIDER, TENANT_ID } from './search-attributes';
import { SYNC_JOB_WORKFLOW, type SyncJobWorkflow } from './sync-job';
import { WEBHOOK_DELIVERY_WORKFLOW, type WebhookDeliveryWorkflow } from './webhook-delivery';
import { CONNECTION_PURGE_WORKFLOW, connectionPurgeWorkflowId, type ConnectionPurgeInput, type ConnectionPurgeWorkflow } from './purge';

/** How long a request's calls to Temporal may take when nothing says otherwise (API_TEMPORAL_TIMEOUT_SECONDS' default). */
export const DEFAULT_TEMPORAL_TIMEOUT_MS = 10_000;

/**
 * Runs `fn` with every call to Temporal it makes (through `client`'s connection, in its async
 * context: what it awaits and what it starts without awaiting) failing with DEADLINE_EXCEEDED once
 * `ms` from now have passed. The deadline replaces any of the caller's context, later or earlier:
 * work that outlives a request (a start after its answer) gets its own. A client without deadlines
 * (a test's stand-in for one) runs `fn` as it is.
 */
export async function withTemporalDeadline<T>(client: Client, ms: number, fn: () => Promise<T>): Promise<T> {
  if (typeof (client as Partial<Client> | undefined)?.withDeadline !== 'function') return fn();
  return client.withDeadline(Date.now() + ms, fn);
}

/**
 * Runs `fn` with its calls to Temporal (as withTemporalDeadline: what it awaits and what it starts
 * without awaiting) failing with DEADLINE_EXCEEDED once `ms` have passed from the first of them,
 * so time `fn` spends on anything else (statements, row locks, a turn at the pool) is not counted.
 * A deadline set inside `fn` (withTemporalDeadline) replaces this one for what it runs. A client
 * whose connection keeps no call context (a test's stand-in) gets withTemporalDeadline's.
 */
export async function withTemporalBudget<T>(client: Client, ms: number, fn: () => Promise<T>): Promise<T> {
  const storage = (client as Partial<Client> | undefined)?.connection as { callContextStorage?: Connection['callContextStorage'] } | undefined;
  const context = storage?.callContextStorage;
  if (!context) return withTemporalDeadline(client, ms, fn);
  let deadline: number | undefined;
  // The connection reads `deadline` when each call is made: the first read fixes it.
  const outer = context.getStore();
  return context.run(
    {
      ...outer,
      get deadline() {
        deadline ??= Date.now() + ms;
        return deadline;
      },
    },
    fn,
  );
}

/** The identity of a connection, as its workflow's search attributes show it. */
export interface ConnectionRef {
  id: string;
  tenantId: string;
  providerSlug: string;
}

/** How every caller starts a connection's workflow: one id, queue, input and search attributes. */
function connectionWorkflowOptions(taskQueue: string, connection: ConnectionRef) {
  return {
    workflowId: connectionWorkflowId(connection.id),
    taskQueue,
    args: [{ connectionId: connection.id }] as [ConnectionWorkflowInput],
    typedSearchAttributes: [
      { key: CONNECTION_ID, value: connection.id },
      { key: TENANT_ID, value: connection.tenantId },
      { key: PROVIDER, value: connection.providerSlug },
    ],
  };
}

/**
 * Starts the connection's workflow, or returns the running one (conflict policy "use existing"),
 * so every caller (API create, reconcile tick, any number at once) can simply ensure it.
 * `startDelayMs` (the reconcile tick's spread of a cold start) has the server hold a new
 * workflow's first task that long; the workflow is running, and listed, from the start, and a
 * signal-with-start ends the wait at once.
 */
export async function ensureConnectionWorkflow(
  client: Client,
  taskQueue: string,
  connection: ConnectionRef,
  startDelayMs = 0,
): Promise<WorkflowHandle<ConnectionWorkflow>> {
  return client.workflow.start<ConnectionWorkflow>(CONNECTION_WORKFLOW, {
    ...connectionWorkflowOptions(taskQueue, connection),
    workflowIdConflictPolicy: 'USE_EXISTING',
    ...(startDelayMs > 0 && { startDelay: startDelayMs }),
  });
}

/**
 * Sends `signal` to the connection's workflow, starting the workflow first when none is running
 * (signal-with-start, with the same id, queue, input and search attributes as
 * ensureConnectionWorkflow), so a signal is never lost to a missing workflow: a fresh run finds it
 * waiting and acts on it in its first cycle.
 */
export async function signalConnectionWorkflow<Args extends unknown[]>(
  client: Client,
  taskQueue: string,
  connection: ConnectionRef,
  signal: SignalDefinition<Args>,
  ...signalArgs: Args
): Promise<void> {
  // Typed by this function's signature; the SDK's conditional option type cannot see a generic Args.
  await client.workflow.signalWithStart<ConnectionWorkflow, unknown[]>(CONNECTION_WORKFLOW, {
    ...connectionWorkflowOptions(taskQueue, connection),
    signal: signal as SignalDefinition<unknown[]>,
    signalArgs,
  });
}

/** What `call` answers, or false when the workflow it calls on does not exist (never started, or gone). */
async function falseIfNotFound(call: () => Promise<boolean>): Promise<boolean> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/**
 * Sends `signal` about a scheduler's queued job to the connection run that queued it (`runId`;
 * the current run when unknown) only while that run is open; false when it has ended (then nothing
 * was sent and nothing was started). A later run of the same workflow does not count: its first
 * step fails the job as left behind, so a signal about it would be lost there.
 */
export async function signalRunningConnectionWorkflow<Args extends unknown[]>(
  client: Client,
  connectionId: string,
  runId: string | null,
  signal: SignalDefinition<Args>,
  ...signalArgs: Args
): Promise<boolean> {
  return falseIfNotFound(async () => {
    await client.workflow.getHandle<ConnectionWorkflow>(connectionWorkflowId(connectionId), runId ?? undefined).signal(signal, ...signalArgs);
    return true;
  });
}

/**
 * Cancels the running workflow of a connection (disabled connections): the workflow cancels its
 * queued or running job and completes. Returns false when none was running.
 */
export async function stopConnectionWorkflow(client: Client, connectionId: string): Promise<boolean> {
  const handle = client.workflow.getHandle(connectionWorkflowId(connectionId));
  return falseIfNotFound(async () => {
    const description = await handle.describe();
    if (description.status.name !== 'RUNNING') return false;
    await handle.cancel();
    return true;
  });
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
): Promise<WorkflowHandle<SyncJobWorkflow>> {
  return client.workflow.start<SyncJobWorkflow>(SYNC_JOB_WORKFLOW, {
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
  await client.workflow.start<ReconcileWorkflow>(RECONCILE_WORKFLOW, {
    workflowId: RECONCILE_WORKFLOW_ID,
    taskQueue,
    args: [{ tickSeconds, retentionDays }],
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}

/** The handle of a connection's workflow, for signals and the `state` query. */
export function connectionHandle(client: Client, connectionId: string): WorkflowHandle<ConnectionWorkflow> {
  return client.workflow.getHandle<ConnectionWorkflow>(connectionWorkflowId(connectionId));
}

/** The connection workflow's live state; rejects when it is not running or does not answer within `deadlineMs`. */
export async function queryConnectionState(client: Client, connectionId: string, deadlineMs: number): Promise<ConnectionState> {
  return client.withDeadline(Date.now() + deadlineMs, () => connectionHandle(client, connectionId).query(stateQuery));
}

/** Requests cancellation of a job's `sync-job:` workflow; false when it has none (yet). */
export async function cancelJobWorkflow(client: Client, jobId: string): Promise<boolean> {
  return falseIfNotFound(async () => {
    await client.workflow.getHandle<SyncJobWorkflow>(syncJobWorkflowId(jobId)).cancel();
    return true;
  });
}

/**
 * Starts an immediate sync as `immediate-sync:<connection_id>`; null when one of that connection
 * is already running (one at a time per connection). The server ends it after
 * `executionTimeoutMs` whatever becomes of the caller, so none runs on forever.
 */
export async function startImmediateSync(
  client: Client,
  taskQueue: string,
  input: ImmediateSyncInput,
  executionTimeoutMs: number,
): Promise<WorkflowHandle<ImmediateSyncWorkflow> | null> {
  try {
    return await client.workflow.start<ImmediateSyncWorkflow>(IMMEDIATE_SYNC_WORKFLOW, {
      workflowId: immediateSyncWorkflowId(input.connectionId),
      taskQueue,
      args: [input],
      workflowExecutionTimeout: executionTimeoutMs,
      priority: { priorityKey: IMMEDIATE_SYNC_PRIORITY },
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return null;
    throw err;
  }
}

/** The handle of a connection's immediate sync (`immediate-sync:<connection id>`), running or not. */
export function immediateSyncHandle(client: Client, connectionId: string): WorkflowHandle<ImmediateSyncWorkflow> {
  return client.workflow.getHandle<ImmediateSyncWorkflow>(immediateSyncWorkflowId(connectionId));
}

/** The counts an immediate sync's activity last sent in its heartbeat; null before its first page. */
export async function immediateSyncProgress(client: Client, handle: WorkflowHandle<ImmediateSyncWorkflow>): Promise<ImmediateSyncProgress | null> {
  const { raw } = await handle.describe();
  const payloads = raw.pendingActivities?.[0]?.heartbeatDetails?.payloads;
  if (!payloads?.length) return null;
  return decodeFromPayloadsAtIndex<ImmediateSyncProgress>(client.options.loadedDataConverter, 0, payloads);
}

/** Requests cancellation of an immediate sync (its activity stops the request in flight); false when it had already closed. */
export async function cancelImmediateSync(handle: WorkflowHandle<ImmediateSyncWorkflow>): Promise<boolean> {
  return falseIfNotFound(async () => {
    await handle.cancel();
    return true;
  });
}

const GRPC_UNIMPLEMENTED = 12;

/**
 * The ids of every running Synctide connection, job, webhook-delivery and connection-purge
 * workflow, from one visibility listing (a page per 1,000). Null when the server has no list API
 * (Temporal's time-skipping test server): callers then ask about each workflow they care about
 * instead. With `shownPaused`, adds to it the connection workflows whose phase the listing shows
 * `paused` (waiting for a resume).
 */
export async function listRunningWorkflowIds(client: Client, shownPaused?: Set<string>): Promise<Set<string> | null> {
  const ids = new Set<string>();
  try {
    const query = `WorkflowType IN ('${CONNECTION_WORKFLOW}', '${SYNC_JOB_WORKFLOW}', '${WEBHOOK_DELIVERY_WORKFLOW}', '${CONNECTION_PURGE_WORKFLOW}') AND ExecutionStatus = 'Running'`;
    for await (const info of client.workflow.list({ query, pageSize: 1000 })) {
      ids.add(info.workflowId);
      if (shownPaused && info.type === CONNECTION_WORKFLOW && info.typedSearchAttributes.get(PHASE) === 'paused') shownPaused.add(info.workflowId);
    }
  } catch (err) {
    // The client wraps the server's gRPC status in a ServiceError.
    const grpc = isGrpcServiceError(err) ? err : (err as { cause?: unknown }).cause;
    if (isGrpcServiceError(grpc) && grpc.code === GRPC_UNIMPLEMENTED) return null;
    throw err;
  }
  return ids;
}

/** Ids per visibility query of `listRunningAmong` (keeps the query text short). */
const IDS_PER_QUERY = 100;

/**
 * Which of `workflowIds` have a running execution, by visibility queries (one per 100 ids). For a
 * second look at workflows a first listing missed: visibility is updated asynchronously, so a
 * workflow started just before a listing may appear only a moment later.
 */
export async function listRunningAmong(client: Client, workflowIds: string[]): Promise<{ running: Set<string>; calls: number }> {
  const running = new Set<string>();
  let calls = 0;
  for (let i = 0; i < workflowIds.length; i += IDS_PER_QUERY) {
    const ids = workflowIds.slice(i, i + IDS_PER_QUERY).map((id) => `'${id.replaceAll("'", "''")}'`);
    calls += 1;
    for await (const info of client.workflow.list({ query: `ExecutionStatus = 'Running' AND WorkflowId IN (${ids.join(', ')})`, pageSize: IDS_PER_QUERY })) {
      running.add(info.workflowId);
    }
  }
  return { running, calls };
}

/** Whether the workflow `workflowId` has a running execution (asked of the server, not visibility). */
export async function isWorkflowRunning(client: Client, workflowId: string): Promise<boolean> {
  return falseIfNotFound(async () => (await client.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING');
}

/** Requests cancellation of a connection's running workflow (it cancels its job and completes). */
export async function cancelConnectionWorkflow(client: Client, connectionId: string): Promise<void> {
  try {
    await connectionHandle(client, connectionId).cancel();
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}

/**
 * Starts the `webhook-delivery:<id>` workflow of each delivery, or finds it running (conflict
 * policy "use existing"); a delivery whose earlier workflow closed gets a new run (redelivery, or
 * a pending delivery whose workflow died). The one way deliveries are started. Returns the ids it
 * started or found; a failed start is left for the reconcile tick, which starts every pending
 * delivery whose workflow is not running.
 */
export async function startWebhookDeliveries(client: Client, taskQueue: string, deliveryIds: string[]): Promise<string[]> {
  const started: string[] = [];
  for (const deliveryId of deliveryIds) {
    try {
      await client.workflow.start<WebhookDeliveryWorkflow>(WEBHOOK_DELIVERY_WORKFLOW, {
        workflowId: webhookDeliveryWorkflowId(deliveryId),
        taskQueue,
        args: [{ deliveryId }],
        workflowIdConflictPolicy: 'USE_EXISTING',
      });
      started.push(deliveryId);
    } catch {
      // Temporal unreachable or overloaded: the reconcile tick starts it later.
    }
  }
  return started;
}

/** Starts the `connection-purge:<id>` workflow of a purge, or finds it running (conflict policy "use existing"). */
export async function startConnectionPurge(client: Client, taskQueue: string, purge: ConnectionPurgeInput): Promise<void> {
  await client.workflow.start<ConnectionPurgeWorkflow>(CONNECTION_PURGE_WORKFLOW, {
    workflowId: connectionPurgeWorkflowId(purge.purgeId),
    taskQueue,
    args: [purge],
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}
