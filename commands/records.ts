// Commands on a connection's synced records: the change feed consumers follow.
import type { RecordChange } from '../db/models/records';
import { FEED_SCAN_BUDGET, findFeedExpiry, readChangesPage } from '../db/models/records';
import { DEFAULT_FEED_PAGE_MAX_BYTES } from '../lib/config';
import type { FeedCursor } from '../policy/cursors';
import { withTransaction } from '../db/transaction';
import { purgeInProgress } from './connections';
import type { CommandDeps } from './deps';
import { CommandRefused, invalid, notFound } from './errors';

export type { RecordChange };
export { FEED_SCAN_BUDGET };

/**
 * The refusal of a feed cursor sealed under a credentials key this deployment no longer holds
 * (removed after a rotation): its position cannot be read, so, as after purged tombstones, the
 * reader starts again from the start (410 `cursor_expired`). Every page's cursor is sealed under
 * the active key, so only a reader idle since before the rotation meets it.
 */
export function cursorKeyRemoved(): CommandRefused {
  return new CommandRefused('gone', 'cursor_expired', 'this cursor was sealed with a key this deployment no longer holds; read the feed again from the start (no cursor)', {});
}

/**
 * The refusal of a plain feed cursor (one not sealed, as handed out before cursors were sealed):
 * anyone can make one at any position, and reading from it would show where the positions of the
 * sequence every tenant shares stand. It is answered as a cursor that can no longer be read, the
 * same at every position (410 `cursor_expired`): the reader starts again from the start.
 */
export function cursorUnsealed(): CommandRefused {
  return new CommandRefused('gone', 'cursor_expired', 'this cursor is not sealed (made before feed cursors were sealed, or by hand) and is no longer read; read the feed again from the start (no cursor)', {});
}

/**
 * The refusal of a feed cursor that names no connection (sealed before cursors named theirs, from
 * an event stored before then): positions are of one sequence every connection shares, so it
 * cannot be told which feed it is a position in, and read on another connection's feed it would
 * pass over that feed's earlier changes. Its reader starts again from the start (410
 * `cursor_expired`), as for other cursors that can no longer be read.
 */
function cursorUnscoped(): CommandRefused {
  return new CommandRefused('gone', 'cursor_expired', 'this cursor names no connection (made before feed cursors named their connection) and is no longer read; read the feed again from the start (no cursor)', {});
}

/** Which changes to read: after cursor `after` (none: from the start), at most `limit`. */
export interface ChangesQuery {
  after?: FeedCursor;
  limit: number;
  resourceType?: string;
  modifiedAfter?: Date;
}

/** One page of the feed: the changes and the cursor to continue from (at the last one read, or where `after` was). */
export interface ChangesPage {
  changes: RecordChange[];
  next: FeedCursor;
  /**
   * True when the page is full (its `limit` of changes, or its byte budget), or a read filtering by
   * modified_after ran out of its scan budget first: more changes may follow at once.
   */
  hasMore: boolean;
}

/**
 * Reads a page of connection `connectionId`'s change feed: inserts, updates and tombstones in
 * `change_seq` order, each record once in its latest state. Writers of one connection commit in
 * sequence order (they hold the connection's feed lock), so a position once passed never gains a
 * change behind it. The purge log and the page come from one snapshot: a cursor past which a
 * purge removed a tombstone of the reader's resource types after the cursor was issued is refused
 * (`cursor_expired`, 410) rather than silently skipping a deletion; reading again from the start
 * rebuilds a copy. A purge the cursor's issuer had already seen, or of another resource type than
 * the reader follows, never expires it. The next cursor carries the snapshot's purge epoch and
 * the connection (and the resource type read, if one): positions are of one sequence shared by
 * every connection and type, so a cursor of another connection's feed, or of one type's feed read
 * without that type, is refused (invalid, 400) rather than read past this feed's changes. So is
 * a cursor whose position or purge epoch is past any the feed has issued (a forged cursor, or one
 * of a database restored to an earlier point): the changes later written at the positions up to
 * it, and the purges up to its epoch, would pass it by without a word. The cursor of a read
 * filtering by `modifiedAfter` carries that time: it may have passed changes the filter left out,
 * so read with an earlier time it is refused too (400), and read without one it goes on under its
 * own (a reader that gave the time on its first read only follows the feed from there); a cursor
 * issued without it (or before cursors carried it) serves any reader. A cursor naming no
 * connection (issued before cursors named theirs) is no longer read (`cursor_expired`, 410): its
 * reader starts again from the start.
 *
 * A page is bounded in bytes as well as in changes (`deps.feedPageMaxBytes`, FEED_PAGE_MAX_BYTES):
 * it stops before the change whose data would pass the budget, but always holds one change, so
 * a record larger than the budget never stalls the feed; its cursor continues after the last
 * change it holds. A thousand records of the largest size a provider may send would otherwise be
 * one answer of a gigabyte, built in the API process every tenant's requests share.
 * A read filtering by `modifiedAfter` is bounded in the changes it examines too (FEED_SCAN_BUDGET,
 * those the filter leaves out included): when they run out before the page is full the page ends
 * there, short or empty, with `hasMore`; its cursor continues after the last change examined,
 * whether or not the page held it, so the next read does not walk them again.
 *
 * While the connection's purge is open the feed is refused (`purge_in_progress`, 409).
 */
export async function listChanges(deps: CommandDeps, connectionId: string, query: ChangesQuery): Promise<ChangesPage> {
  const afterSeq = query.after?.seq ?? '0';
  const connection = connectionId.toLowerCase();
  return withTransaction(
    deps.pool,
    async (tx) => {
      // The cursor's judgement and the connection's open purge, in one statement.
      const expiry = await findFeedExpiry(tx, { connectionId, afterSeq, epoch: query.after?.epoch ?? '0', resourceType: query.resourceType });
      if (!expiry) throw notFound('no connection with that id');
      // A purge deletes the records without tombstones: once it is open (in this snapshot) a page
      // could lack deletions and still look complete, so the feed is refused (409
      // `purge_in_progress`) until the connection is gone (404). The purge is recorded before its
      // first delete, so a snapshot without it has every record.
      if (expiry.purge_id !== null) throw purgeInProgress(expiry.purge_id);
      if (query.after && query.after.connection === undefined) throw cursorUnscoped();
      if (query.after && query.after.connection !== connection) {
        throw invalid("cursor: a cursor of another connection's feed; read this connection's feed from the start (no cursor) or with its own cursor");
      }
      if (query.after?.resourceType !== undefined && query.after.resourceType !== query.resourceType) {
        throw invalid(`cursor: a cursor of the feed of resource type ${JSON.stringify(query.after.resourceType)} only; read with that resource_type, or from the start (no cursor)`);
      }
      // A filtered reader's cursor may have passed changes its filter left out: read with an
      // earlier time it would pass them by (400); read without one, it goes on under its own.
      if (query.after?.modifiedAfter !== undefined && query.modifiedAfter && query.modifiedAfter.getTime() < query.after.modifiedAfter) {
        throw invalid(`cursor: a cursor of the feed of changes written after ${new Date(query.after.modifiedAfter).toISOString()} only; read with that modified_after (or a later one, or none: the cursor's), or from the start (no cursor)`);
      }
      const modifiedAfter = query.modifiedAfter ?? (query.after?.modifiedAfter !== undefined ? new Date(query.after.modifiedAfter) : undefined);
      if (!expiry.issued) {
        throw invalid('cursor: a position past any this feed has issued; read the feed from the start (no cursor) or with a cursor it issued');
      }
      // The answer names no position (how far the purge went): positions are of the sequence every
      // tenant's changes share, which sealed cursors hide.
      if (query.after && expiry.purged_through !== null) {
        throw new CommandRefused('gone', 'cursor_expired', 'tombstones after this cursor have been purged; read the feed again from the start (no cursor)', {});
      }
      const { changes, cut, spent, examined } = await readChangesPage(tx, {
        connectionId, afterSeq, limit: query.limit, resourceType: query.resourceType, modifiedAfter,
        maxBytes: deps.feedPageMaxBytes ?? DEFAULT_FEED_PAGE_MAX_BYTES,
      });
      return {
        changes,
        // At the last change examined: the page's last, or, filtering by modified_after, past the
        // changes the filter left out after it (the next read does not walk them again).
        next: {
          seq: examined ?? afterSeq, epoch: expiry.epoch, connection, resourceType: query.resourceType,
          ...(modifiedAfter !== undefined && { modifiedAfter: modifiedAfter.getTime() }),
        },
        hasMore: cut || spent || changes.length === query.limit,
      };
    },
    { snapshot: true },
  );
}
