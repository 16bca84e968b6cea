// Commands on a connection's synced records: the change feed consumers follow.
import type { RecordChange } from '../db/models/records';
import { findFeedPurgedSeq, readChanges } from '../db/models/records';
import { withTransaction } from '../db/transaction';
import type { CommandDeps } from './deps';
import { CommandRefused, notFound } from './errors';

export type { RecordChange };

/** Which changes to read: after feed position `afterSeq` ('0' from the start), at most `limit`. */
export interface ChangesQuery {
  afterSeq: string;
  limit: number;
  resourceType?: string;
  modifiedAfter?: Date;
}

/** One page of the feed: the changes and the position to continue from (the last one read, or `afterSeq`). */
export interface ChangesPage {
  changes: RecordChange[];
  nextSeq: string;
  /** True when the page is full: more changes may follow at once. */
  hasMore: boolean;
}

/**
 * Reads a page of connection `connectionId`'s change feed: inserts, updates and tombstones in
 * `change_seq` order, each record once in its latest state. Writers of one connection commit in
 * sequence order (they hold the connection's feed lock), so a position once passed never gains a
 * change behind it. The purge mark and the page come from one snapshot: a cursor older than the
 * last purged tombstone is refused (`cursor_expired`, 410) rather than silently skipping a
 * deletion; reading again from the start rebuilds a copy.
 */
export async function listChanges(deps: CommandDeps, connectionId: string, query: ChangesQuery): Promise<ChangesPage> {
  return withTransaction(
    deps.pool,
    async (tx) => {
      const purgedSeq = await findFeedPurgedSeq(tx, connectionId);
      if (purgedSeq === null) throw notFound('no connection with that id');
      if (query.afterSeq !== '0' && BigInt(query.afterSeq) < BigInt(purgedSeq)) {
        throw new CommandRefused('gone', 'cursor_expired', 'tombstones after this cursor have been purged; read the feed again from the start (no cursor)', {
          purged_through: purgedSeq,
        });
      }
      const changes = await readChanges(tx, { connectionId, ...query });
      return { changes, nextSeq: changes.at(-1)?.change_seq ?? query.afterSeq, hasMore: changes.length === query.limit };
    },
    { snapshot: true },
  );
}
