// What the one paging loop (`pagesOf`) keeps of the pages a task fetched, to refuse a page it
// already fetched: a fixed size per page, however long a provider's next page token is (a next URL
// of up to 16 KiB, the http connector's limit), for every page a task may fetch
// (PROVIDER_MAX_PAGES_PER_TASK, 100,000 by default). Measured on the heap after a full collection.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { pagesOf } from '../connectors/pages';
import { DEFAULT_PROVIDER_POLICY } from '../connectors/provider-http';
import type { Connector } from '../connectors/types';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** The heap in use after a full collection (what is still referenced). */
const liveHeap = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

describe('the paging loop keeps little of each page fetched', () => {
  it('20,000 pages whose tokens are 16 KiB each (320 MiB of tokens) leave less than 40 MiB on the heap while the loop runs', async () => {
    const PAGES = 20_000;
    const SIZE = 16 * 1024;
    // Each token a distinct flat string of 16 KiB, as a decoded next URL is.
    const tokenOf = (n: number) => Buffer.alloc(SIZE, 0x61 + (n % 26)).toString('latin1').slice(0, SIZE - 8) + String(n).padStart(8, '0');
    const long: Connector = {
      slug: 'long',
      resourceTypes: () => ['items'],
      fetchPage: async ({ pageToken }) => {
        const n = pageToken === null ? 0 : Number(pageToken.slice(-8)) + 1;
        return { records: [], nextPageToken: n + 1 < PAGES ? tokenOf(n) : null };
      },
    };
    const before = liveHeap();
    const pages = pagesOf(long, { resource: 'items', since: null, until: null, config: {}, credentials: null, policy: { ...DEFAULT_PROVIDER_POLICY, maxPagesPerTask: PAGES } }, null);
    let seen = 0;
    let kept = 0;
    for await (const page of pages) {
      seen += 1;
      // Measured at the last page, with the loop (and what it keeps) still alive.
      if (page.nextPageToken === null) kept = liveHeap() - before;
    }
    expect(seen).toBe(PAGES);
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(40 * 1024 * 1024);
  });
});
