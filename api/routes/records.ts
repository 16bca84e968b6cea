import { createRoute, OpenAPIHono, type z } from '@hono/zod-openapi';
import { invalid } from '../../commands/errors';
import { cursorKeyRemoved, cursorUnsealed, listChanges } from '../../commands/records';
import { feedCursors } from '../../lib/feed-cursors';
import { exactJson } from '../../policy/exact-json';
import type { ApiDeps } from '../deps';
import type { ApiEnv } from '../env';
import { presentRecordChange } from '../present';
import { CURSOR_PROBLEM } from '../pagination';
import { conflict, errorResponses, IdParams, jsonAnswer, notFound } from '../schemas/common';
import { ListRecordsQuery, RecordPageSchema } from '../schemas/records';

const tags = ['records'];

const list = createRoute({
  method: 'get', path: '/connections/{id}/records', tags, operationId: 'listRecordChanges',
  summary: "A connection's change feed: inserts, updates and deletions (tombstones) in order, from a cursor",
  description:
    'Poll with `next_cursor` to see every insert, update and delete exactly once, in order, even while a sync is writing. ' +
    'A record changed several times between two reads appears once, in its latest state.',
  request: { params: IdParams, query: ListRecordsQuery },
  responses: {
    200: jsonAnswer(RecordPageSchema, 'One page of changes'),
    ...errorResponses,
    404: notFound,
    409: conflict('The connection is being deleted (`purge_in_progress`, with `purge_id`): its records are going without tombstones, so no page is answered; drop the copy', 'purge_in_progress'),
    410: conflict('Tombstones past the cursor were purged after it was issued, it was sealed with a key this deployment no longer holds, it is not sealed (made before cursors were sealed), or it names no connection (made before cursors named their connection) (`cursor_expired`): read again from the start', 'cursor_expired'),
  },
});

/** Routes of a connection's records: parse, call a command, present. */
export function recordRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<ApiEnv>();

  app.openapi(list, async (c) => {
    const { id } = c.req.valid('param');
    const query = c.req.valid('query');
    // Sealed: a cursor's position is of one sequence every tenant's changes share.
    const cursors = feedCursors(deps.credentials);
    const after = query.cursor === undefined ? undefined : cursors.open(query.cursor);
    if (after === 'key_gone') throw cursorKeyRemoved();
    if (after === 'unsealed') throw cursorUnsealed();
    if (after === null) throw invalid(CURSOR_PROBLEM);
    const page = await listChanges(deps, id, {
      after,
      limit: query.limit,
      resourceType: query.resource_type,
      modifiedAfter: query.modified_after ? new Date(query.modified_after) : undefined,
    });
    const body: z.infer<typeof RecordPageSchema> = { items: page.changes.map(presentRecordChange), next_cursor: cursors.encode(page.next), has_more: page.hasMore };
    // The JSON answer c.json would give, but with the records' numbers as stored (an int64 amount
    // keeps its digits), which JSON.stringify cannot write.
    return c.body(exactJson(body), 200, { 'content-type': 'application/json' }) as unknown as ReturnType<typeof c.json<typeof body, 200>>;
  });

  return app;
}
