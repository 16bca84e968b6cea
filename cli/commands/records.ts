// records tail: follows a connection's change feed with its cursor, like `tail -f`.
import { setTimeout as sleep } from 'node:timers/promises';
import { parse, stringify } from 'lossless-json';
import type { components } from '../../clients/typescript';
import { answer } from '../api';
import { int, seconds, str, type Command } from '../command';
import { CliError, errorJson, EXIT, MAX_RETRIED_POLLS, retriedRead, retryWaitMs } from '../errors';
import { notice, when } from '../output';

type Change = components['schemas']['RecordChange'];
type Page = components['schemas']['RecordPage'];

/**
 * A page of the feed from its text, every number as the feed wrote it: a record's int64 amount or
 * long fraction keeps its digits (JSON.parse would give the nearest double). Written back with
 * `stringify`, each number is its text again and the rest is as JSON.stringify writes it.
 */
const readPage = (text: string): Page => parse(text) as Page;

/** A change as one line: `insert  issues/123  2026-11-26 18:00:00  {"title":…}`. */
export function changeLine(change: Change, withData: boolean): string {
  const data = withData && change.data !== undefined ? `  ${stringify(change.data)}` : '';
  return `${change.change.padEnd(6)}  ${change.resource_type}/${change.external_id}  ${when(change.deleted_at ?? change.source_updated_at ?? change.synced_at)}${data}`;
}

export const recordCommands: Command[] = [
  {
    words: ['records', 'tail'],
    summary: "Follow a connection's change feed (inserts, updates, deletions in order); --json writes one change a line",
    args: ['<connection-id>'],
    flags: {
      cursor: { type: 'string', value: '<cursor>', description: 'Resume from this cursor (printed on stderr when tail stops; with --json as {"cursor": …}); default the start of the feed' },
      'resource-type': { type: 'string', value: '<type>', description: 'Only changes of this resource type' },
      limit: { type: 'string', value: '<n>', description: 'Stop after n changes' },
      once: { type: 'boolean', description: 'Stop when caught up instead of following' },
      data: { type: 'boolean', description: "Print each record's data too (always in --json)" },
      poll: { type: 'string', value: '<seconds>', description: 'How often to ask for new changes once caught up (default 2)' },
    },
    async run({ client, settings, out, signal }, flags, [id]) {
      const max = int(flags, 'limit', 1);
      const pollMs = seconds(flags, 'poll', 2000);
      const resourceType = str(flags, 'resource-type');
      let cursor = str(flags, 'cursor');
      let seen = 0;
      /** Reads answered in a row with a status that asks to be tried again. */
      let retried = 0;
      /** Whether the API has answered a read of this tail (then a read that reaches no API is made again). */
      let reached = false;
      const stop = (code: number) => {
        if (cursor) notice(out, { cursor }, () => `cursor: ${cursor}`);
        return code as typeof EXIT.ok;
      };
      for (;;) {
        const pageSize = Math.min(1000, max === undefined ? 500 : max - seen);
        let page: Page;
        try {
          const text = await answer(
            settings.url,
            client.GET('/connections/{id}/records', {
              params: { path: { id: id! }, query: { limit: pageSize, ...(cursor && { cursor }), ...(resourceType && { resource_type: resourceType }) } },
              signal,
              parseAs: 'text',
            }),
          );
          page = readPage(text);
          retried = 0;
          reached = true;
        } catch (err) {
          if (signal.aborted) return stop(EXIT.interrupted);
          // An answer that asks to be tried again (429, 502, 503, 504), or no answer at all from an
          // API that answered before (a restart, a deploy): the feed is still there.
          if (retriedRead(err, reached) && retried < MAX_RETRIED_POLLS) {
            retried++;
            const waitMs = retryWaitMs(pollMs, retried, settings.retryWaitMs);
            notice(
              out,
              { retry: { reading: 'feed', connection_id: id, attempt: retried, max_attempts: MAX_RETRIED_POLLS, wait_ms: waitMs, error: errorJson(err) } },
              () => `${err.message}; reading the feed again (${retried}/${MAX_RETRIED_POLLS})`,
            );
            try {
              await sleep(waitMs, undefined, { signal });
            } catch {
              return stop(EXIT.interrupted);
            }
            continue;
          }
          // Stopped by a failure (the API unreachable, an error answer): where it was is said as
          // on any other stop, so a later tail resumes there instead of at the start of the feed;
          // but not a cursor the API refused (400, 410 cursor_expired): no tail resumes from it.
          const refused = err instanceof CliError && (err.status === 400 || err.status === 410);
          if (!refused) stop(EXIT.failure);
          throw err;
        }
        for (const change of page.items) out.stdout.write(`${out.json ? stringify(change) : changeLine(change, flags.data === true)}\n`);
        seen += page.items.length;
        cursor = page.next_cursor;
        if (max !== undefined && seen >= max) return stop(EXIT.ok);
        if (page.has_more) continue;
        if (flags.once) return stop(EXIT.ok);
        try {
          await sleep(pollMs, undefined, { signal });
        } catch {
          return stop(EXIT.interrupted);
        }
      }
    },
  },
];
