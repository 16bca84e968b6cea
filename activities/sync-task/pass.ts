import type { Context } from '@temporalio/activity';
import { getConnector } from '../../connectors/registry';
import type { Connector, ConnectorRecord, FetchPageResult, StoredValidator } from '../../connectors/types';
import type { SeenSetSize } from '../../db/models/seen';
import { findEtags } from '../../db/models/provider-etags';
import { findCursors } from '../../db/models/state';
import type { TaskToSync } from '../../db/models/tasks';
import type { Logger } from '../../lib/logger';
import { earliestStampDuring } from '../../policy/cursor';
import type { SyncWindow } from '../../policy/window';
import type { SyncTaskInput } from '../../temporal/activities';
import { credentialProvider, withCurrentCredential, type CredentialProvider } from '../credential-provider';
import type { ActivityDeps } from '../deps';
import type { ClaimedTask } from './claim';

/**
 * How often one run of a task may start its full pass again because the seen-set was lost. Beyond
 * that the run fails, and the job's retry policy decides.
 */
const MAX_PASS_RESTARTS = 3;

/**
 * Thrown by a progress write that found the task no longer this run's: a later claim took it over
 * (a retry Temporal started after this attempt's heartbeat timed out) or it ended meanwhile. The
 * run stops and writes nothing more.
 */
export class TaskTakenOver extends Error {
  constructor(taskId: string) {
    super(`sync task ${taskId} is no longer held by this run: a later attempt took it over, or it ended`);
    this.name = 'TaskTakenOver';
  }
}

/** What one run of a claimed task reads with and writes to, fixed for the run. */
export interface Pass {
  input: SyncTaskInput;
  task: TaskToSync;
  /** This run's claim token: each progress write goes ahead only while the run still holds the task. */
  claim: string;
  connectionId: string;
  full: boolean;
  /** A backfill never moves the cursor, nor uses or stores ETags. */
  backfill: boolean;
  /** An incremental backfill's window [start, end): only the records changed inside it are stored. */
  window: SyncWindow | null;
  /** Per partition, where an incremental pass of the connection's own (no window) starts. */
  cursors: Map<string, Date> | undefined;
  since: Date | null;
  until: Date | null;
  /** The task's first start (a resumed task keeps it), which caps every cursor. */
  passStart: Date;
  /** The pass start less the clock skew: the deletion step judges only records the provider changed before it. */
  changedBefore: Date;
  /** The credential source: the connector asks it for the current credential with every request. */
  source: CredentialProvider;
  connector: Connector;
  log: Logger;
}

/**
 * The pass of a claimed task. The connector asks for the current credential with every request
 * (an OAuth 2 token is refreshed near its expiry and once after a 401); it never sees how it was
 * obtained. A backfill never moves the cursor. An incremental backfill fetches its window
 * [start, end) instead of from the cursor (the connector's `since` and `until`) and stores only
 * the records changed inside it, whatever the connector served: a record changed at `end` belongs
 * to the next window, one without a change time to none.
 */
export async function openPass(deps: ActivityDeps, input: SyncTaskInput, claimed: ClaimedTask): Promise<Pass> {
  const { task, claim } = claimed;
  const connectionId = task.connection_id;
  const source = credentialProvider(deps, connectionId, task.credentials, task.oauth_grant_id, task.config);
  const connector = withCurrentCredential(getConnector(task.provider_slug), source);
  const backfill = task.window_start !== null;
  const window: SyncWindow | null =
    input.mode === 'incremental' && task.window_start !== null ? { start: task.window_start, end: task.window_end } : null;
  // An incremental pass of the connection's own (no window) starts each partition at its cursor.
  const cursors = input.mode === 'incremental' && !window ? await findCursors(deps.pool, connectionId, input.resourceType) : undefined;
  const passStart = claimed.startedAt;
  return {
    input,
    task,
    claim,
    connectionId,
    full: input.mode === 'full',
    backfill,
    window,
    cursors,
    since: input.mode === 'incremental' ? (window?.start ?? cursors?.get('') ?? null) : null,
    until: window?.end ?? null,
    passStart,
    // A record the provider stamped at or after the earliest stamp a change during the pass can
    // carry was alive during the pass: the deletion step never judges it.
    changedBefore: earliestStampDuring(passStart),
    source,
    connector,
    log: deps.logger.child({ job_id: input.jobId, task_id: input.taskId, connection_id: connectionId, resource_type: input.resourceType }),
  };
}

/**
 * Whether connection config `current` (null: the connection is gone) lists `resourceType` as
 * `config` did: the same listing (the connector's `listing`; a config it cannot read lists
 * nothing) and, for a connector with partitions, no partition `config` did not name. A pass read
 * under `config`: what it read says nothing of another listing, nor of a partition added since.
 */
export function listsAlike(connector: Connector, resourceType: string, config: Record<string, unknown>, current: Record<string, unknown> | null): boolean {
  if (current === null) return false;
  const read = <T>(f: () => T, otherwise: T): T => {
    try {
      return f();
    } catch {
      return otherwise;
    }
  };
  if (connector.listing) {
    const listed = (c: Record<string, unknown>) => read(() => connector.listing!(c, resourceType), null);
    if (listed(current) !== listed(config)) return false;
  }
  if (connector.partitions) {
    const named = new Set(read(() => connector.partitions!(config), []));
    if (read(() => connector.partitions!(current), [] as string[]).some((p) => !named.has(p))) return false;
  }
  return true;
}

/**
 * Conditional requests (stored ETags) for the connection's own incremental passes; a backfill
 * neither uses nor stores them (its pass is bounded by a window).
 */
export async function validatorsOf(deps: Pick<ActivityDeps, 'pool'>, pass: Pass): Promise<Map<string, StoredValidator> | undefined> {
  return !pass.backfill && pass.input.mode === 'incremental' ? findEtags(deps.pool, pass.connectionId, pass.input.resourceType) : undefined;
}

/**
 * Where a run stands in its pass: the page token and counts the task's progress logged, and per
 * partition the newest change time seen (`highWater`) and the time its cursor may not pass
 * (`holds`). The activity heartbeats the page token with every stored page.
 */
export class PassProgress {
  pageToken: string | null;
  pages: number;
  entityCount: number;
  writtenCount: number;
  /** Records an incremental backfill's connector served outside its window (dropped). */
  outsideWindow = 0;
  readonly highWater: Map<string, Date>;
  readonly holds: Map<string, Date>;
  private restarts = 0;

  constructor(
    task: TaskToSync,
    private readonly ctx: Context,
    private readonly log: Logger,
  ) {
    this.pageToken = task.page_token;
    this.pages = task.pages_done;
    this.entityCount = task.entity_count;
    this.writtenCount = task.written_count;
    const marks = (field: 'high' | 'hold') => new Map(Object.entries(task.partition_progress?.[field] ?? {}).map(([p, t]) => [p, new Date(t)]));
    this.highWater = marks('high');
    this.holds = marks('hold');
  }

  /**
   * Sends the pass back to its first page after its seen-set was found lost (`when`); throws
   * beyond MAX_PASS_RESTARTS restarts in one run, deleting nothing.
   */
  restart(size: SeenSetSize, when: string): void {
    this.restarts += 1;
    this.log.warn(
      { seen_stored: size.stored, seen_counted: size.counted, pages_discarded: this.pages, restarts: this.restarts, attempt: this.ctx.info.attempt },
      `full sync task: the seen-set does not match its logged count (${size.stored} ids stored, ${size.counted} counted) ${when}; restarting the pass from its first page, deleting nothing`,
    );
    if (this.restarts > MAX_PASS_RESTARTS) {
      throw new Error(`full sync task: the seen-set was lost ${this.restarts} times in one run; giving up this attempt without deleting`);
    }
    this.pageToken = null;
    this.pages = 0;
    this.entityCount = 0;
    this.highWater.clear();
    this.holds.clear();
    this.beat();
  }

  /** Whether the pass has stored its last page: some pages stored, and no page after them. */
  pagedToTheEnd(): boolean {
    return this.pages > 0 && this.pageToken === null;
  }

  /** Moves each partition's marks by a page's records (newest change time) and its held cursors (earliest hold). */
  mark(records: readonly ConnectorRecord[], holdCursors: FetchPageResult['holdCursors']): void {
    for (const record of records) {
      const t = record.updatedAt ? new Date(record.updatedAt) : null;
      const partition = record.partition ?? '';
      const seen = this.highWater.get(partition);
      if (t && !Number.isNaN(t.getTime()) && (!seen || t > seen)) this.highWater.set(partition, t);
    }
    this.hold((holdCursors ?? []).map(({ partition, at }) => ({ partition, at: new Date(at) })));
  }

  /** Moves each partition's hold to the earliest of its hold and the given times (an invalid time holds nothing). */
  hold(holds: readonly { partition: string; at: Date }[]): void {
    for (const { partition, at } of holds) {
      const held = this.holds.get(partition);
      if (!Number.isNaN(at.getTime()) && (!held || at < held)) this.holds.set(partition, at);
    }
  }

  /** The marks as the task's logged progress (ISO times). */
  logged(): { high: Record<string, string>; hold: Record<string, string> } {
    const iso = (m: Map<string, Date>) => Object.fromEntries([...m].map(([p, t]) => [p, t.toISOString()]));
    return { high: iso(this.highWater), hold: iso(this.holds) };
  }

  /** Counts a stored page and heartbeats where the pass stands, so a retried attempt resumes after it. */
  stored(nextPageToken: string | null, records: number, written: number): void {
    this.pageToken = nextPageToken;
    this.pages += 1;
    this.entityCount += records;
    this.writtenCount += written;
    this.beat();
  }

  /** Heartbeats where the pass stands (what a retried attempt resumes after). */
  beat(): void {
    this.ctx.heartbeat(this.where());
  }

  /** Where the pass stands: its page token and the pages stored so far. */
  where(): { pageToken: string | null; pages: number } {
    return { pageToken: this.pageToken, pages: this.pages };
  }
}
