import type { Connector, FetchPageInput, FetchPageResult } from './types';

/**
 * Pages through one resource of a connector, starting at `pageToken` (null: the first page) and
 * following each page's `nextPageToken` until there is none. Every page is asked for with the same
 * bounds (`request.since`, `request.until`). Stops with the signal's reason before a fetch once
 * `request.signal` has aborted. The one paging loop of job tasks and immediate syncs.
 */
export async function* pagesOf(
  connector: Connector,
  request: Omit<FetchPageInput, 'pageToken'>,
  pageToken: string | null,
): AsyncGenerator<FetchPageResult> {
  let token = pageToken;
  do {
    request.signal?.throwIfAborted();
    const page = await connector.fetchPage({ ...request, pageToken: token });
    yield page;
    token = page.nextPageToken;
  } while (token);
}
