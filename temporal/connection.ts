// Contract of the connection workflow `connection:<connection_id>`: its input, signals, query and
// live state. The API, the reconcile tick and the `temporal` CLI talk to a connection through
// exactly these names; the workflow implements them.
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { JobOutcome, Phase, SyncMode } from '../policy/vocabulary';

/** Workflow type name of the connection scheduler. */
export const CONNECTION_WORKFLOW = 'connectionWorkflow';

/**
 * The payload of the legacy `updateSchedule` signal, as the workflow accepted it: an interval or a
 * cron expression (the other is removed). Only runs of older API versions and the CLI send it;
 * Synctide's commands store the schedule themselves and send `replan`.
 */
export type ScheduleChange = { interval_seconds: number } | { cron: string };

/** Payload of the legacy `updateSchedule`, as a client sends it (validated by the workflow). */
export interface ScheduleChangeRequest {
  interval_seconds?: number;
  cron?: string;
  /**
   * The cron's IANA time zone and the periodic full sync. The API stores both in the connection
   * before it signals; the workflow reads them from there when it re-plans, not from the signal.
   */
  timezone?: string;
  full_sync_every?: number | string;
}

/** Run now instead of waiting; `mode` defaults to incremental. */
export const syncNowSignal = defineSignal<[{ mode?: SyncMode }?]>('syncNow');
/** Stop scheduling runs until `resume` (a running job finishes; a queued one is cancelled). */
export const pauseSignal = defineSignal('pause');
/** Resume scheduling after `pause`. */
export const resumeSignal = defineSignal('resume');
/**
 * The stored schedule changed: while sleeping, the next run is re-planned at once from the
 * schedule as stored (read by an activity). No payload: the row is the one owner of the schedule.
 */
export const replanSignal = defineSignal('replan');
/**
 * Legacy: change the interval or cron through the workflow, which validates and stores it, then
 * re-plans. Kept for runs that received it from an older API, and for the CLI.
 */
export const updateScheduleSignal = defineSignal<[ScheduleChangeRequest]>('updateSchedule');
/** Cancel the current job, queued or running; the schedule goes on with the next cycle. */
export const cancelJobSignal = defineSignal('cancelJob');
/**
 * Look at the stored connection again now: a run waiting paused reads its status at once (the
 * reconcile tick sends it to runs that wait paused while their row says active: a resume whose
 * signal was lost). Changes nothing by itself; no payload, the row is the owner of the status.
 */
export const recheckSignal = defineSignal('recheck');

/** Live state returned by the `state` query. Times are ISO strings. */
export interface ConnectionState {
  connection_id: string;
  phase: Phase;
  next_run_at: string | null;
  scheduled_at: string | null;
  last_jitter_seconds: number | null;
  current_job_id: string | null;
  last_outcome: JobOutcome | null;
  breaker: { paused_until: string } | null;
  /** Signals received and not yet acted on. */
  pending: string[];
  /** Completed cycles across continue-as-new. */
  cycles: number;
}

/** Returns the connection workflow's live state. */
export const stateQuery = defineQuery<ConnectionState>('state');

/** Intents recorded by signal handlers; only the main loop acts on them. */
export interface Intents {
  syncNow: SyncMode | null;
  /** `paused` / `active` when a pause or resume is pending (the last one wins). */
  status: 'paused' | 'active' | null;
  /** A legacy `updateSchedule` payload not yet stored. */
  schedule: ScheduleChange | null;
  /** A `replan` not yet acted on (absent in state carried by older runs). */
  replan?: boolean;
  /** A `recheck` not yet acted on: the next look at the stored connection answers it. */
  recheck?: boolean;
  cancelJob: boolean;
}

/** What one run hands the next across continue-as-new. */
export interface CarriedState {
  intents: Intents;
  lastOutcome: ConnectionState['last_outcome'];
  lastJitterSeconds: number | null;
  nextRunAt: string | null;
  cycles: number;
}

/** Input of the connection workflow. */
export interface ConnectionWorkflowInput {
  connectionId: string;
  carried?: CarriedState;
}

/** The connection workflow's signature, which clients start it by. */
export type ConnectionWorkflow = (input: ConnectionWorkflowInput) => Promise<void>;
