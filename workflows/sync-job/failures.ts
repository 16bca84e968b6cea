// How the job workflow reads a failed task: its kind (the connector's typed error survives as the
// activity failure's type) and a provider-facing message, without stack or internals.
import { TimeoutType } from '@temporalio/common';
import { ActivityFailure, ApplicationFailure, TimeoutFailure, patched } from '@temporalio/workflow';

/**
 * Marks the workflow versions that tell an interrupted task (cut off by a worker shutdown or
 * crash, or held by an earlier attempt) from a failed one. Runs that started before replay the
 * old reading, where both were ordinary failures.
 */
export const INTERRUPTIONS_PATCH = 'task-interruptions';

/** A task that failed in an attempt. */
export interface TaskFailure {
  taskId: string;
  resourceType: string;
  kind: 'rate_limited' | 'transient' | 'permanent' | 'interrupted' | 'error';
  message: string;
  retryAfterSeconds?: number;
}

/** The kind and provider-facing reason of a failed activity. */
export function failureOf(err: unknown, resourceType: string): Omit<TaskFailure, 'taskId'> {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (isInterruption(cause) && patched(INTERRUPTIONS_PATCH)) {
    return { resourceType, kind: 'interrupted', message: `interrupted: ${cause instanceof Error ? cause.message : String(cause)}` };
  }
  if (cause instanceof ApplicationFailure) {
    const kind = cause.type === 'rate_limited' || cause.type === 'transient' || cause.type === 'permanent' ? cause.type : 'error';
    const hint = (cause.details?.[0] as { retryAfterSeconds?: number | null } | undefined)?.retryAfterSeconds;
    return { resourceType, kind, message: cause.message, ...(hint != null && { retryAfterSeconds: hint }) };
  }
  return { resourceType, kind: 'error', message: cause instanceof Error ? cause.message : String(cause) };
}

/** A worker shut down under the task (the SDK's `WorkerShutdown` failure) or went silent (no heartbeat). */
function isInterruption(cause: unknown): boolean {
  return (
    (cause instanceof ApplicationFailure && cause.type === 'WorkerShutdown') ||
    (cause instanceof TimeoutFailure && cause.timeoutType === TimeoutType.HEARTBEAT)
  );
}

/** One line naming every failed resource type and why, e.g. `1 of 3 resource types failed: users: …`. */
export function summarise(failures: TaskFailure[], total: number): string {
  return `${failures.length} of ${total} resource types failed: ${failures.map((f) => `${f.resourceType}: ${f.message}`).join('; ')}`;
}
