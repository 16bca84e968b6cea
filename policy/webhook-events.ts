// Webhook events about a job's end, typed: which event a finished job sends, and its payload,
// built here from the facts the database holds. Pure: no I/O.
import type { CursorCodec, FeedCursor } from './cursors';
import type { FinishedJobStatus, JobTrigger, SyncMode, WebhookEventType } from './vocabulary';

/** The event every job end sends, by the status it ended with (whoever ended it). */
export const JOB_EVENT_TYPES = {
  completed: 'sync.completed',
  failed: 'sync.failed',
  cancelled: 'sync.cancelled',
} as const satisfies Record<FinishedJobStatus, WebhookEventType>;
/** A job event's type. */
export type JobEventType = (typeof JOB_EVENT_TYPES)[FinishedJobStatus];

/** What a job event says, as read in the transaction that ended the job. */
export interface JobEventFacts {
  id: string;
  connection_id: string;
  job_type: SyncMode;
  trigger: JobTrigger;
  status: FinishedJobStatus;
  started_at: Date | null;
  finished_at: Date | null;
  last_error: string | null;
  added: number;
  updated: number;
  deleted: number;
  unchanged: number;
  /** The connection's feed head when the job ended. */
  feed: FeedCursor;
}

/** The `data` of a job event: the job, its record counts over its tasks, its error summary, and a records-feed cursor at the connection's latest change. */
export interface JobEventData {
  job: {
    id: string;
    connection_id: string;
    job_type: SyncMode;
    trigger: JobTrigger;
    status: FinishedJobStatus;
    started_at: string | null;
    finished_at: string | null;
  };
  counts: { added: number; updated: number; deleted: number; unchanged: number };
  error: string | null;
  cursor: string;
}

/**
 * The `data` of the event of a job that ended as `facts` says, its feed cursor encoded by
 * `cursors` (sealed under the credentials key active when the event is written): the event's body
 * is fixed then, so every attempt and redelivery under its one `webhook-id` sends the same bytes.
 */
export function jobEventData(facts: JobEventFacts, cursors: CursorCodec<FeedCursor>): JobEventData {
  return {
    job: {
      id: facts.id,
      connection_id: facts.connection_id,
      job_type: facts.job_type,
      trigger: facts.trigger,
      status: facts.status,
      started_at: facts.started_at?.toISOString() ?? null,
      finished_at: facts.finished_at?.toISOString() ?? null,
    },
    counts: { added: facts.added, updated: facts.updated, deleted: facts.deleted, unchanged: facts.unchanged },
    error: facts.last_error,
    cursor: cursors.encode(facts.feed),
  };
}

/** The `data` of `connection.breaker_opened`: the breaker paused the connection after repeated failures. */
export interface BreakerOpenedData {
  connection_id: string;
  provider_slug: string;
  consecutive_failures: number;
  /** When the breaker lets the connection run again (ISO 8601). */
  paused_until: string;
  /** The last failure's message (provider text redacted and cut). */
  last_error: string;
}

/** The `data` of `connection.breaker_closed`: a successful attempt closed the breaker. */
export interface BreakerClosedData {
  connection_id: string;
  closed_at: string;
}

/** The `data` of `connection.disabled`. */
export interface ConnectionDisabledData {
  connection_id: string;
  disabled_at: string;
}

/** The `data` of `connection.credentials_invalid`: the provider refused the OAuth grant; the connection needs new credentials. */
export interface CredentialsInvalidData {
  connection_id: string;
  provider_slug: string;
  /** What the provider said, or why no refresh was possible. */
  reason: string;
  /** When the connection became `needs_reauth` (ISO 8601). */
  at: string;
}

/**
 * The `data` of each event type: what the emitters write (typed through insertConnectionEvent)
 * and what the OpenAPI document's `webhooks` show (its schemas are checked against these types).
 */
export interface WebhookEventData {
  'sync.completed': JobEventData;
  'sync.failed': JobEventData;
  'sync.cancelled': JobEventData;
  'connection.breaker_opened': BreakerOpenedData;
  'connection.breaker_closed': BreakerClosedData;
  'connection.disabled': ConnectionDisabledData;
  'connection.credentials_invalid': CredentialsInvalidData;
}

/** One event as written: its type and that type's `data`. */
export type WebhookEvent = { [T in WebhookEventType]: { type: T; data: WebhookEventData[T] } }[WebhookEventType];
