// A fake provider for the declarative `http` connector, on 127.0.0.1 over real HTTP, that behaves
// like a real one while its data changes: one list of items sorted by change time ascending (ties
// by id; or newest first, descending by change time and id, with `newestFirst`, as many providers
// list by default), change times in whole seconds from the wall clock, `updated_since` (inclusive, or
// exclusive while `sinceExclusive`: many real providers' `updated_after`), and one route per
// paging style under /<style>/items:
//
// - none:    every item in one answer;
// - link:    a Link rel="next" URL whose `after` is an opaque keyset position (change time, id),
//            the items after it in the listing's order (older ones, newest first);
// - next:    the same position as a next URL in the body (`next`);
// - cursor:  the same position as an opaque cursor in the body (`meta.next_cursor`, param `cursor`);
// - page:    page numbers (`page`, `per_page`; the first page 1, or 0 with `pagesFrom: 0`) over the
//            list as it is at the request: they shift;
// - offset:  offsets (`offset`, `limit`) over the list as it is at the request: they shift;
// - and /<style>/items/<id>: one item as `{ item }`, 404 once deleted.
//
// The keyset styles are stable, as real providers' cursors are: an item present for the whole pass
// is served once at least, when it is not changed meanwhile; one changed moves to the end of an
// ascending listing (ahead of the position) or to the head of a newest-first one (behind it, where
// the pages still ahead never serve it); positions are not. `beforeRequest` runs before each page request is
// answered (the test's changes "between page requests"), `requests` counts what was asked.
import { afterEach } from 'vitest';
import { serve } from './fake-server';

export interface FakeItem {
  id: string;
  name: string;
  version: number;
  updated_at: string;
}

export const FAKE_HTTP_STYLES = ['none', 'link', 'next', 'cursor', 'page', 'offset'] as const;
export type FakeHttpStyle = (typeof FAKE_HTTP_STYLES)[number];

/** The http connector pagination config of each style, for a page size. */
export function paginationOf(style: FakeHttpStyle, size: number): Record<string, unknown> {
  switch (style) {
    case 'none':
      return { type: 'none' };
    case 'link':
      return { type: 'link_header' };
    case 'next':
      return { type: 'next_url', path: 'next' };
    case 'cursor':
      return { type: 'cursor', path: 'meta.next_cursor', param: 'cursor' };
    case 'page':
      return { type: 'page_number', param: 'page', start: 1, size_param: 'per_page', size };
    case 'offset':
      return { type: 'offset', param: 'offset', limit_param: 'limit', limit: size };
  }
}

/** Where each style's records are in the body. */
export const RECORDS_PATH: Record<FakeHttpStyle, string> = { none: '$', link: '$', next: 'data', cursor: 'items', page: 'results', offset: '$' };

/**
 * The http connector config of one resource, `items`, read from the fake at `baseUrl` in `variant`'s
 * paging style with pages of `size`: listed in change order (`keyset`), and with a look-up of
 * one item (`lookups`, whose listing is then not stable).
 */
export function itemsConfig(baseUrl: string, variant: { style: FakeHttpStyle; keyset?: boolean; lookups?: boolean }, size: number): Record<string, unknown> {
  return {
    base_url: baseUrl,
    pagination: { ...paginationOf(variant.style, size), ...(variant.lookups && { stable: false }) },
    resources: {
      items: {
        path: `/${variant.style}/items`, records: RECORDS_PATH[variant.style], id: 'id', updated_at: 'updated_at', since: { param: 'updated_since' },
        ...(variant.keyset && { order: 'change_ascending' }),
        ...(variant.lookups && { item: { path: `/${variant.style}/items/{id}`, record: 'item' } }),
      },
    },
  };
}

const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const order = (a: FakeItem, b: FakeItem) => (a.updated_at < b.updated_at ? -1 : a.updated_at > b.updated_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
/** Whether (change time, id) `a` comes after `b` in the listing's order. */
const follows = (a: [string, string], b: [string, string], newestFirst: boolean) => {
  const ascending = a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
  const same = a[0] === b[0] && a[1] === b[1];
  return newestFirst ? !ascending && !same : ascending;
};
const encodePosition = (item: FakeItem) => Buffer.from(JSON.stringify([item.updated_at, item.id])).toString('base64url');
function decodePosition(text: string): [string, string] {
  return JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as [string, string];
}

export interface FakeHttpProvider {
  baseUrl: string;
  /** Items by id (the provider's truth). */
  items: Map<string, FakeItem>;
  /** Page requests answered so far. */
  requests: number;
  /** Whether `updated_since` leaves out the items changed at that very time (`>`, not `>=`). */
  sinceExclusive: boolean;
  /** Whether the listing is newest first (descending by change time, then id) instead of ascending. */
  newestFirst: boolean;
  /** The keyset positions (change time, id) the answers' next links or cursors gave, in order; the test may empty it. */
  positions: Array<{ at: string; id: string }>;
  /** Runs before each page request is answered: the place for changes between page requests. */
  beforeRequest: ((url: URL) => void) | null;
  /** Runs after `beforeRequest`: true answers the request 503 (a provider error on that page). */
  failRequest: ((url: URL) => boolean) | null;
  /** A promise holds a list page's answer, made at the request, until it settles (a slow answer: the data is as it was when asked). */
  holdResponse: ((url: URL) => Promise<void> | null) | null;
  /** The current second (whole seconds), never before the last change time given out. */
  now(): number;
  /** A new item; with `id`, one of that id (an item deleted and created again under its old id). */
  create(name?: string, id?: string): FakeItem;
  /** The next version of an item; `at` (ms) stamps it at that time instead, even one before its last (a provider clock gone back). */
  edit(id: string, at?: number): FakeItem;
  remove(id: string): void;
  /** The truth, sorted as the provider lists it (ascending by change time and id, or newest first). */
  list(): FakeItem[];
  close(): Promise<void>;
}

/**
 * For a test file: starts fakes as `startFakeHttpProvider` does, each closed after the test that
 * started it.
 */
export function useFakeHttpProviders(): (opts: Parameters<typeof startFakeHttpProvider>[0]) => Promise<FakeHttpProvider> {
  const open: FakeHttpProvider[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((f) => f.close()));
  });
  return async (opts) => {
    const fake = await startFakeHttpProvider(opts);
    open.push(fake);
    return fake;
  };
}

/** Starts the fake with `initial` items (change times given), serving `size` items a page. */
export async function startFakeHttpProvider(opts: {
  size: number;
  initial?: FakeItem[];
  clock?: () => number;
  /** Headers added to every page answer (e.g. rate-limit headers). */
  headers?: Record<string, string>;
  /** Lists newest first (see FakeHttpProvider.newestFirst). */
  newestFirst?: boolean;
  /** The number of the first page of the `page` style (1 unless given). */
  pagesFrom?: 0 | 1;
}): Promise<FakeHttpProvider> {
  const items = new Map<string, FakeItem>((opts.initial ?? []).map((i) => [i.id, { ...i }]));
  const clock = opts.clock ?? Date.now;
  let nextId = items.size + 1;
  let latest = 0;
  const state: Omit<FakeHttpProvider, 'baseUrl' | 'close'> = {
    items,
    requests: 0,
    sinceExclusive: false,
    newestFirst: opts.newestFirst ?? false,
    positions: [],
    beforeRequest: null,
    failRequest: null,
    holdResponse: null,
    now() {
      latest = Math.max(latest, Math.floor(clock() / 1000) * 1000);
      return latest;
    },
    create(name, given) {
      const id = given ?? `i${String(nextId++).padStart(5, '0')}`;
      const item = { id, name: name ?? `item ${id}`, version: 1, updated_at: iso(state.now()) };
      items.set(id, item);
      return item;
    },
    edit(id, stamp) {
      const old = items.get(id);
      if (!old) throw new Error(`no item ${id}`);
      // A change time never goes back (unless stamped); within one second it stays (a real provider's whole seconds).
      const at = stamp ?? Math.max(state.now(), Date.parse(old.updated_at));
      const item = { ...old, version: old.version + 1, name: `${old.id} v${old.version + 1}`, updated_at: iso(at) };
      items.set(id, item);
      return item;
    },
    remove(id) {
      items.delete(id);
    },
    list() {
      const sorted = [...items.values()].sort(order);
      return state.newestFirst ? sorted.reverse() : sorted;
    },
  };

  const server = await serve((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    state.requests += 1;
    state.beforeRequest?.(url);
    if (state.failRequest?.(url)) {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error": "unavailable"}');
      return;
    }
    const q = url.searchParams;
    const since = q.get('updated_since');
    const sinceMs = since === null ? null : Date.parse(since);
    const listed = state.list().filter((i) => sinceMs === null || Date.parse(i.updated_at) > sinceMs || (!state.sinceExclusive && Date.parse(i.updated_at) === sinceMs));
    const send = (body: unknown, headers: Record<string, string> = {}) => {
      const text = JSON.stringify(body);
      const write = () => {
        res.writeHead(200, { 'content-type': 'application/json', ...opts.headers, ...headers });
        res.end(text);
      };
      const hold = state.holdResponse?.(url);
      if (hold) void hold.then(write);
      else write();
    };
    const size = opts.size;
    /** The keyset page after `after` (exclusive), and the position of its last item when more follow. */
    const keysetPage = (after: string | null) => {
      const from = after === null ? null : decodePosition(after);
      const rest = from === null ? listed : listed.filter((i) => follows([i.updated_at, i.id], from, state.newestFirst));
      const page = rest.slice(0, size);
      if (rest.length <= size) return { page, next: null };
      const last = page[page.length - 1]!;
      state.positions.push({ at: last.updated_at, id: last.id });
      return { page, next: encodePosition(last) };
    };
    const withAfter = (after: string) => {
      const next = new URL(url.pathname, `http://${req.headers.host}`);
      if (since !== null) next.searchParams.set('updated_since', since);
      next.searchParams.set('after', after);
      return next;
    };
    const style = url.pathname.split('/')[1] as FakeHttpStyle;
    const one = /^\/[a-z]+\/items\/([^/]+)$/.exec(url.pathname);
    if (one) {
      // One item by id: 404 once it is deleted.
      const item = items.get(decodeURIComponent(one[1]!));
      res.writeHead(item ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify(item ? { item } : { error: 'not found' }));
      return;
    }
    switch (style) {
      case 'none':
        return send(listed);
      case 'link': {
        const { page, next } = keysetPage(q.get('after'));
        return send(page, next === null ? {} : { link: `<${withAfter(next).href}>; rel="next"` });
      }
      case 'next': {
        const { page, next } = keysetPage(q.get('after'));
        const rel = next === null ? null : withAfter(next);
        return send({ data: page, next: rel === null ? null : `${rel.pathname}${rel.search}` });
      }
      case 'cursor': {
        const { page, next } = keysetPage(q.get('cursor'));
        return send({ items: page, meta: { next_cursor: next } });
      }
      case 'page': {
        const from = opts.pagesFrom ?? 1;
        const page = Number(q.get('page') ?? from) - from;
        const per = Number(q.get('per_page') ?? size);
        return send({ results: page < 0 ? [] : listed.slice(page * per, (page + 1) * per) });
      }
      case 'offset': {
        const offset = Number(q.get('offset') ?? 0);
        const limit = Number(q.get('limit') ?? size);
        return send(listed.slice(offset, offset + limit));
      }
      default:
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error": "not found"}');
    }
  });
  return Object.assign(state, { baseUrl: server.url, close: () => server.close() });
}

/** `n` items, ids i00001…, change times whole seconds ascending from `startMs`, `perSecond` sharing each second. */
export function initialItems(n: number, startMs: number, perSecond = 1): FakeItem[] {
  return Array.from({ length: n }, (_, k) => {
    const id = `i${String(k + 1).padStart(5, '0')}`;
    return { id, name: `item ${id}`, version: 1, updated_at: iso(Math.floor(startMs / 1000) * 1000 + Math.floor(k / perSecond) * 1000) };
  });
}
