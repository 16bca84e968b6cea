// The one way a list route pages: read the query's cursor with the listing's codec (400 with one
// message when this API did not make it) and answer a page's rows with the cursor after its last.
import { invalid } from '../commands/errors';
import type { CursorCodec } from '../policy/cursors';

/** The message of every 400 answer to a cursor this API did not make. */
export const CURSOR_PROBLEM = 'cursor: not a cursor this API made';

/** What a list route asked for: the position after which to read (none for the first page) and how many. */
export interface PageRequest<Position> {
  after: Position | undefined;
  limit: number;
}

/** The position and page size of a listing's query; refuses (400) a cursor `codec` does not read. */
export function pageRequest<Position>(codec: CursorCodec<Position>, query: { cursor?: string; limit: number }): PageRequest<Position> {
  return { after: readCursor(codec, query.cursor), limit: query.limit };
}

/** The position `cursor` encodes; undefined without one; refuses (400) a cursor `codec` does not read. */
export function readCursor<Position>(codec: CursorCodec<Position>, cursor: string | undefined): Position | undefined {
  if (cursor === undefined) return undefined;
  const position = codec.decode(cursor);
  if (position === null) throw invalid(CURSOR_PROBLEM);
  return position;
}

/**
 * A listing's answer: the page's rows presented, and `next_cursor` at its last row when more rows
 * follow (null on the last page).
 */
export function pageAnswer<Row, Position, Item>(
  page: { rows: Row[]; more: boolean },
  codec: CursorCodec<Position>,
  positionOf: (row: Row) => Position,
  present: (row: Row) => Item,
): { items: Item[]; next_cursor: string | null } {
  const last = page.rows.at(-1);
  return { items: page.rows.map(present), next_cursor: page.more && last ? codec.encode(positionOf(last)) : null };
}
