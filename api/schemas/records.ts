import { z } from '@hono/zod-openapi';
import { FEED_SCAN_BUDGET } from '../../commands/records';
import { RECORD_CHANGES } from '../../policy/vocabulary';
import { MillisecondTime, NullableTime, pageSizeQuery } from './common';

/**
 * Longest feed cursor taken: base64url of its JSON, which names the connection and may name a
 * resource type of up to 200 characters (each up to 6 bytes once escaped), so longer than the
 * 200 characters of the lists' cursors.
 */
const MAX_FEED_CURSOR_LENGTH = 2048;

/** The most changes a read filtering by `modified_after` examines, as the descriptions write it. */
const SCAN_BUDGET = String(FEED_SCAN_BUDGET).replace(/\B(?=(\d{3})+$)/g, ',');

/** `GET /connections/:id/records` query. */
export const ListRecordsQuery = z.object({
  resource_type: z.string().min(1).max(200).optional().openapi({ param: { name: 'resource_type', in: 'query' }, description: 'Only changes of this resource type' }),
  cursor: z.string().max(MAX_FEED_CURSOR_LENGTH).optional().openapi({ param: { name: 'cursor', in: 'query' }, description: "next_cursor of the previous page, of this connection and resource_type, and read with the modified_after it was issued under, a later one or none (another connection's cursor, one type's cursor read without that type, a cursor issued under modified_after read with an earlier time (read without one, it goes on under its own), or a position past any the feed issued, answers 400); none to read the feed from the start" }),
  limit: pageSizeQuery(1000, 100),
  modified_after: MillisecondTime.optional()
    .openapi({ param: { name: 'modified_after', in: 'query' }, description: `Only changes written after this time, to the millisecond at most (a convenience filter; a read without it, from the start or a cursor issued without it, sees every change). A read examines at most ${SCAN_BUDGET} changes, those the filter leaves out included, so a page may end short, or empty, with \`has_more\`; its next_cursor carries this modified_after, and goes on under it when read without one (an earlier one answers 400)` }),
});

/** One change of the feed: the record as it is after its latest write. */
export const RecordChangeSchema = z
  .object({
    external_id: z.string(),
    resource_type: z.string(),
    data: z.unknown().openapi({ description: "The provider's record; a tombstone keeps its last data" }),
    source_updated_at: NullableTime.openapi({
      description: "When the provider last changed the record (its change time), in UTC: to the millisecond, or to the microsecond when the provider's time is not a whole millisecond (`2026-01-01T00:00:00.123456Z`); the zone the provider wrote it in is not kept",
    }),
    synced_at: z.string().openapi({ description: 'When this change was written' }),
    deleted_at: NullableTime.openapi({ description: 'Set on a tombstone: a full sync found the record gone at the provider' }),
    change: z.enum(RECORD_CHANGES),
  })
  .openapi('RecordChange');

/** A page of the change feed. */
export const RecordPageSchema = z
  .object({
    items: z.array(RecordChangeSchema),
    next_cursor: z.string().openapi({ description: 'Where the next read continues (after the last change examined: past the changes `modified_after` left out too); always set (poll with it to see later changes)' }),
    has_more: z.boolean().openapi({ description: `The page is full (\`limit\` changes, or its byte budget, FEED_PAGE_MAX_BYTES), or a read filtering by \`modified_after\` examined its most changes (${SCAN_BUDGET}) first, so the page may be short or empty: read again at once` }),
  })
  .openapi('RecordPage');
