import { type NativeConnection, Worker, type WorkerOptions, type WorkflowBundleOption } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';
import { WORKFLOW_INTERCEPTOR_MODULES, WORKFLOWS_PATH } from '../infra/workflow-bundle';
import { temporalWorkerTracing } from '../lib/tracing';

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
  /** WORKER_TARGET_CPU: with it, at most `activitySlots` activities, but no more once CPU use is above it. */
  targetCpu?: number;
}

/** The SDK's fixed slots when a worker names none. */
export const SDK_DEFAULT_SLOTS = { workflowTasks: 40, activities: 100, localActivities: 100, nexusTasks: 100 } as const;

/** Activities a worker with WORKER_TARGET_CPU runs whatever its CPU use: progress on a saturated node. */
export const MIN_SCHEDULED_ACTIVITY_SLOTS = 4;
/** Workflow tasks it runs whatever its CPU use (two: the SDK polls its sticky and its normal queue). */
export const MIN_SCHEDULED_WORKFLOW_TASK_SLOTS = 2;

/**
 * The scheduled lane's slots. Without a CPU target: fixed, `activitySlots` activities (the SDK's
 * default otherwise). With one: Temporal's resource-based supplier hands out activity and
 * workflow-task slots while the measured CPU use (the container's against its cgroup v2 limit,
 * else the host's) stays under the target: activities between MIN_SCHEDULED_ACTIVITY_SLOTS and
 * `activitySlots` (default the SDK's 100), workflow tasks between MIN_SCHEDULED_WORKFLOW_TASK_SLOTS
 * and the SDK's 40. On a saturated node a busy tenant's long syncs and their runs' tasks then wait in the
 * server's queues, and an immediate sync of another tenant (its own lane, with fixed slots) finds
 * CPU to run on. Local activity and Nexus slots stay fixed at the SDK's defaults.
 */
export function scheduledSlotOptions(deps: Pick<WorkerDeps, 'activitySlots' | 'targetCpu'>): Partial<WorkerOptions> {
  if (deps.targetCpu === undefined) {
    return deps.activitySlots === undefined ? {} : { maxConcurrentActivityTaskExecutions: deps.activitySlots };
  }
  // CPU gates. Memory is bounded by the worker's cache (WORKER_MAX_CACHED_WORKFLOWS); its target
  // of 1 holds slots back only when memory is nearly full (over about 95 %). Both kinds share the
  // worker's one controller (the SDK allows one resource-based configuration per worker).
  const tunerOptions = { targetCpuUsage: deps.targetCpu, targetMemoryUsage: 1 };
  const maximumSlots = deps.activitySlots ?? SDK_DEFAULT_SLOTS.activities;
  return {
    tuner: {
      workflowTaskSlotSupplier: {
        type: 'resource-based',
        tunerOptions,
        minimumSlots: MIN_SCHEDULED_WORKFLOW_TASK_SLOTS,
        maximumSlots: SDK_DEFAULT_SLOTS.workflowTasks,
      },
      localActivityTaskSlotSupplier: { type: 'fixed-size', numSlots: SDK_DEFAULT_SLOTS.localActivities },
      nexusTaskSlotSupplier: { type: 'fixed-size', numSlots: SDK_DEFAULT_SLOTS.nexusTasks },
      activityTaskSlotSupplier: {
        type: 'resource-based',
        tunerOptions,
        minimumSlots: Math.min(MIN_SCHEDULED_ACTIVITY_SLOTS, maximumSlots),
        maximumSlots,
      },
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
 * tenant's running jobs may hold every connection of that one.
 */
export async function createImmediateWorker(
  deps: Omit<WorkerDeps, 'maxCachedWorkflows' | 'activitySlots' | 'targetCpu'> & { taskQueue: string; slots: number; pool: ActivityDeps['pool'] },
): Promise<Worker> {
  const { syncImmediately } = createActivities({ ...deps.activities, pool: deps.pool });
  return Worker.create({
    ...workflowOptions(deps),
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
 * tracing interceptors (a prebuilt bundle has the workflow ones in it already) and sink.
 */
export async function createWorker(deps: WorkerDeps): Promise<Worker> {
  return Worker.create({
    ...workflowOptions(deps),
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.activities.taskQueue,
    activities: createActivities(deps.activities),
    shutdownGraceTime: `${deps.shutdownGraceSeconds}s`,
    ...(deps.maxCachedWorkflows !== undefined && { maxCachedWorkflows: deps.maxCachedWorkflows }),
    ...scheduledSlotOptions(deps),
    // Heartbeats carry cancellation to a sync task: send them at least every second so a
    // cancelled job stops within about a page instead of up to 0.8 × the heartbeat timeout.
    maxHeartbeatThrottleInterval: '1 second',
  });
}

/** The workflows a worker runs (a prebuilt bundle, or WORKFLOWS_PATH bundled now) and the tracing interceptors and sink. */
function workflowOptions(deps: Pick<WorkerDeps, 'workflowBundle'>) {
  const tracing = temporalWorkerTracing();
  return {
    ...(deps.workflowBundle ? { workflowBundle: deps.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    interceptors: { ...tracing.interceptors, ...(!deps.workflowBundle && { workflowModules: WORKFLOW_INTERCEPTOR_MODULES }) },
    sinks: tracing.sinks,
  };
}
