import { type ActivityInterceptorsFactory, type NativeConnection, Worker, type WorkerOptions, type WorkflowBundleOption } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';
import { activityTenant } from '../activities/activity-tenant';
import { WORKFLOW_INTERCEPTOR_MODULES, WORKFLOWS_PATH } from '../infra/workflow-bundle';
import { temporalWorkerTracing } from '../lib/tracing';
import { tenantTurnsPool } from './tenant-pool';
import { immediateLaneInterceptor, type LaneGate, scheduledLaneInterceptor, ScheduledWorkflowTaskSlots } from './lane-gate';

/** What a Synctide worker needs. */
export interface WorkerDeps {
  connection: NativeConnection;
  namespace: string;
  /** How long in-flight activities may finish their transaction on shutdown before cancellation. */
  shutdownGraceSeconds: number;
  /** A prebuilt bundle (`npm run build:workflows`, or the tests' own); otherwise the worker bundles WORKFLOWS_PATH. */
  workflowBundle?: WorkflowBundleOption;
  activities: ActivityDeps;
  /** Workflow runs kept in memory between tasks; 0 keeps none (every task replays its run's history). */
  maxCachedWorkflows?: number;
  /** Activities run at once (the SDK's default, 100, when unset; tests saturate a worker with fewer). */
  activitySlots?: number;
  /**
   * The process's LaneGate (WORKER_TARGET_CPU), shared by its scheduled and immediate worker: with
   * it, while immediate syncs run on a hot node, no more than MIN_SCHEDULED_ACTIVITIES scheduled
   * activities start and one scheduled workflow task per queue runs (workers/lane-gate.ts);
   * without it, the scheduled lane never waits.
   */
  lanes?: LaneGate;
}

/** The SDK's fixed slots when a worker names none. */
export const SDK_DEFAULT_SLOTS = { workflowTasks: 40, activities: 100, localActivities: 100, nexusTasks: 100 } as const;

/**
 * The scheduled lane's slots: `activitySlots` activities (the SDK's default, 100, otherwise) and the
 * SDK's 40 workflow tasks. With a LaneGate, the workflow-task slots come from it
 * (ScheduledWorkflowTaskSlots: one per queue while it holds the lane back); activities keep their
 * fixed slots, as the gate holds them back at their start instead (their slots are reserved by
 * the SDK's pollers before any task arrives, so fewer slots would not stop tasks already polled).
 */
export function scheduledSlotOptions(deps: Pick<WorkerDeps, 'activitySlots' | 'lanes'>): Partial<WorkerOptions> {
  if (deps.lanes === undefined) {
    return deps.activitySlots === undefined ? {} : { maxConcurrentActivityTaskExecutions: deps.activitySlots };
  }
  return {
    tuner: {
      workflowTaskSlotSupplier: new ScheduledWorkflowTaskSlots(deps.lanes, SDK_DEFAULT_SLOTS.workflowTasks),
      activityTaskSlotSupplier: { type: 'fixed-size', numSlots: deps.activitySlots ?? SDK_DEFAULT_SLOTS.activities },
      localActivityTaskSlotSupplier: { type: 'fixed-size', numSlots: SDK_DEFAULT_SLOTS.localActivities },
      nexusTaskSlotSupplier: { type: 'fixed-size', numSlots: SDK_DEFAULT_SLOTS.nexusTasks },
    },
  };
}

/**
 * Creates the worker of immediate syncs on their own task queue (IMMEDIATE_SYNC_TASK_QUEUE): their
 * workflows and activities, with at most `slots` activities running at once (IMMEDIATE_SYNC_SLOTS)
 * and workflow-task slots, a workflow thread and a small cache of their own. However many
 * immediate syncs are asked for, they wait for these slots and never take those of scheduled
 * jobs; and however much scheduled work is backed up, a caller waiting on an immediate sync does
 * not queue behind it. Their statements run on `pool`, which must not be the scheduled work's: a
 * tenant's running jobs may hold every connection of that one. With `lanes`, each immediate
 * sync's activity is reported to the process's LaneGate while it runs, so that the scheduled lane
 * yields on a hot node.
 */
export async function createImmediateWorker(
  deps: Omit<WorkerDeps, 'maxCachedWorkflows' | 'activitySlots'> & { taskQueue: string; slots: number; pool: ActivityDeps['pool'] },
): Promise<Worker> {
  const { syncImmediately } = createActivities({ ...deps.activities, pool: deps.pool });
  return Worker.create({
    ...workflowOptions(deps, deps.lanes && immediateLaneInterceptor(deps.lanes)),
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.taskQueue,
    activities: { syncImmediately },
    maxConcurrentActivityTaskExecutions: deps.slots,
    // An immediate sync is two short workflow tasks around its activity; its run stays cached in
    // between (two polls at least: the SDK needs them for a sticky cache).
    maxConcurrentWorkflowTaskExecutions: Math.max(2, deps.slots),
    maxCachedWorkflows: 4 * deps.slots,
    shutdownGraceTime: `${deps.shutdownGraceSeconds}s`,
    maxHeartbeatThrottleInterval: '1 second',
  });
}

/**
 * Creates the one Synctide worker: all workflows and activities on one task queue, with the
 * tracing interceptors (a prebuilt bundle has the workflow ones in it already) and sink. Its
 * activities' statements on `activities.pool` take their tenant's turns (`tenantTurnsPool`); the
 * local activities' own pool (`activities.localPool`) is not held.
 */
export async function createWorker(deps: WorkerDeps): Promise<Worker> {
  return Worker.create({
    ...workflowOptions(deps, scheduledLaneInterceptor(deps.lanes, activityTenant(deps.activities))),
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.activities.taskQueue,
    // Tenants take turns at the activities' pool: one tenant's tasks hold at most half of it.
    activities: createActivities({ ...deps.activities, pool: tenantTurnsPool(deps.activities.pool) }),
    shutdownGraceTime: `${deps.shutdownGraceSeconds}s`,
    ...(deps.maxCachedWorkflows !== undefined && { maxCachedWorkflows: deps.maxCachedWorkflows }),
    ...scheduledSlotOptions(deps),
    // Heartbeats carry cancellation to a sync task: send them at least every second so a
    // cancelled job stops within about a page instead of up to 0.8 × the heartbeat timeout.
    maxHeartbeatThrottleInterval: '1 second',
  });
}

/**
 * The workflows a worker runs (a prebuilt bundle, or WORKFLOWS_PATH bundled now), the tracing
 * interceptors and sink, and the lane's activity interceptor, innermost (a traced activity's span
 * includes its wait at the gate).
 */
function workflowOptions(deps: Pick<WorkerDeps, 'workflowBundle'>, lane: ActivityInterceptorsFactory | undefined) {
  const tracing = temporalWorkerTracing();
  const activity = [...(tracing.interceptors.activity ?? []), ...(lane ? [lane] : [])];
  return {
    ...(deps.workflowBundle ? { workflowBundle: deps.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    interceptors: {
      ...tracing.interceptors,
      ...(activity.length > 0 && { activity }),
      ...(!deps.workflowBundle && { workflowModules: WORKFLOW_INTERCEPTOR_MODULES }),
    },
    sinks: tracing.sinks,
  };
}
