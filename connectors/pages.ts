import { Permanent, type Connector, type FetchPageInput, type FetchPageResult } from './types';

/** Pages one task may fetch unless MAX_PAGES_PER_TASK says otherwise. */
export const DEFAULT_MAX_PAGES_PER_TASK = 10_000;

/** Bounds of one paging loop: no task may page forever. */
export interface PagingLimits {
  /** Pages the task may fetch in all (resumed attempts included). */
  maxPages: number;
  /** Pages the task had already fetched before this loop (a resumed attempt). */
  pagesDone?: number;
}

/** The page a token stands for (the connector's own description, e.g. its URL), for loop detection and messages. */
function pageKey(connector: Connector, token: string): string {
  try {
    return connector.pageKey?.(token) ?? token;
  } catch {
    return token;
  }
}

/**
 * Pages through one resource of a connector, starting at `pageToken` (null: the first page) and
 * following each page's `nextPageToken` until there is none. Every page is asked for with the same
 * bounds (`request.since`, `request.until`). Stops with the signal's reason before a fetch once
 * `request.signal` has aborted. The one paging loop of job tasks and immediate syncs.
 *
 * Guards: a next page this loop has already fetched (a provider whose Link or cursor points back
 * to an earlier page), or a task past `limits.maxPages`, fails with a `Permanent` error naming the
 * connector and the page: retrying would only page in the same circle.
 */
export async function* pagesOf(
  connector: Connector,
  request: Omit<FetchPageInput, 'pageToken'>,
  pageToken: string | null,
  limits: PagingLimits = { maxPages: DEFAULT_MAX_PAGES_PER_TASK },
): AsyncGenerator<FetchPageResult> {
  let token = pageToken;
  let pages = limits.pagesDone ?? 0;
  const fetched = new Set<string>();
  if (token !== null) fetched.add(pageKey(connector, token));
  do {
    request.signal?.throwIfAborted();
    if (pages >= limits.maxPages) {
      throw new Permanent(
        `${connector.slug} connector: ${request.resource}: more than ${limits.maxPages} pages in one task (MAX_PAGES_PER_TASK); ` +
          `stopped before page ${token === null ? '(first)' : `'${pageKey(connector, token)}'`}`,
      );
    }
    const page = await connector.fetchPage({ ...request, pageToken: token });
    pages += 1;
    yield page;
    token = page.nextPageToken;
    if (token !== null) {
      const key = pageKey(connector, token);
      if (fetched.has(key)) {
        throw new Permanent(
          `${connector.slug} connector: ${request.resource}: paging loop: page ${pages} points back to '${key}', ` +
            'which this task already fetched; stopped instead of paging forever',
        );
      }
      fetched.add(key);
    }
  } while (token);
}
