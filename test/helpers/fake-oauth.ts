// A real OAuth 2 authorization server and protected resource on 127.0.0.1 (node:http), for the
// credential tests: `/authorize` (the "consent": redirects to the redirect URI with a code),
// `/token` (authorization_code with PKCE S256, refresh_token with rotation: each refresh token
// works once, or with `rotation: 'until_successor_used'` until the token that replaced it is used;
// `invalid_grant` for any other; client_credentials: an access token alone, no refresh token),
// `/items` (a JSON list, 401 without a live access token) and `/pages` (`pageCount` pages of
// `pageSize` records by `?page=`, 401 likewise). Counts every token request by grant type.
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeOAuth {
  url: string;
  clientId: string;
  clientSecret: string;
  counts: { refresh: number; code: number; client: number; items: number; unauthorized: number };
  /** Refresh tokens that work (each once: rotation). */
  refreshTokens: Set<string>;
  /** Access tokens the resource accepts. */
  accessTokens: Set<string>;
  /** The resource refuses every token (a grant whose access the provider withdrew). */
  refuseAll: boolean;
  /** expires_in of issued access tokens. */
  expiresIn: number;
  /**
   * The `scope` member of code exchange and refresh answers ('read' by default); null leaves it out
   * (RFC 6749: the scope granted is then the one asked for, or on a refresh the one granted before).
   */
  answerScope: string | null;
  /** Holds each refresh and client credentials answer until this resolves (to make concurrent requests overlap). */
  refreshGate: Promise<void> | null;
  /**
   * How a refresh token is spent: `strict` (default), it works once; `until_successor_used`, it
   * keeps working until the refresh token issued for it is used (as Xero, Okta's grace period or
   * Auth0's reuse interval allow), so a client that lost the answer can refresh again.
   */
  rotation: 'strict' | 'until_successor_used';
  /** Access token → after how many resource requests it expires at the provider (others never do). */
  expireAfterUses: Map<string, number>;
  /** Awaited after a refresh issued its tokens, before its answer is sent. */
  beforeRefreshAnswer: (() => Promise<void>) | null;
  /** Awaited before an authorization code grant is answered (the code exchange of a connect flow). */
  beforeCodeAnswer: (() => Promise<void>) | null;
  /** `/pages`: awaited before a page served with a live token is answered (its number). */
  beforePageAnswer: ((page: number) => Promise<void>) | null;
  /** `/pages`: how many pages, of how many records. */
  pageCount: number;
  pageSize: number;
  /** Every access and refresh token issued so far. */
  issued: string[];
  /** Issues a grant directly (as if consented earlier): its access and refresh token. */
  grant(): { access: string; refresh: string };
  /**
   * Holds the answer of the next code exchange: `asked` resolves once it arrived, and the answer
   * is sent once `release()` is called.
   */
  holdCodeAnswer(): { asked: Promise<void>; release(): void };
  close(): Promise<void>;
}

const body = (req: IncomingMessage) =>
  new Promise<string>((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });

/** `accessToken`: the access token to issue (default a new one each time; e.g. the one token a fake GitHub accepts). */
export async function startFakeOAuth(opts: { accessToken?: () => string; clientSecret?: string } = {}): Promise<FakeOAuth> {
  let n = 0;
  const predecessors = new Map<string, string>();
  const uses = new Map<string, number>();
  const codes = new Map<string, { challenge: string; redirectUri: string }>();
  const issue = () => {
    n += 1;
    const access = opts.accessToken?.() ?? `at_${n}_${'a'.repeat(24)}`;
    const refresh = `rt_${n}_${randomBytes(12).toString('hex')}`;
    fake.issued.push(access, refresh);
    fake.accessTokens.add(access);
    fake.refreshTokens.add(refresh);
    return { access, refresh };
  };
  const fake: FakeOAuth = {
    url: '',
    clientId: 'client-abc',
    clientSecret: opts.clientSecret ?? 'client-secret-XYZ-0123456789',
    issued: [],
    counts: { refresh: 0, code: 0, client: 0, items: 0, unauthorized: 0 },
    refreshTokens: new Set(),
    accessTokens: new Set(),
    refuseAll: false,
    expiresIn: 3600,
    answerScope: 'read',
    refreshGate: null,
    rotation: 'strict',
    expireAfterUses: new Map(),
    beforeRefreshAnswer: null,
    beforeCodeAnswer: null,
    beforePageAnswer: null,
    pageCount: 5,
    pageSize: 10,
    grant: issue,
    holdCodeAnswer() {
      let release!: () => void;
      let arrived!: () => void;
      const asked = new Promise<void>((resolve) => (arrived = resolve));
      const answered = new Promise<void>((resolve) => (release = resolve));
      fake.beforeCodeAnswer = () => {
        fake.beforeCodeAnswer = null;
        arrived();
        return answered;
      };
      return { asked, release };
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', fake.url);
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(value));
    };
    if (url.pathname === '/authorize') {
      const code = `code_${codes.size + 1}`;
      codes.set(code, { challenge: url.searchParams.get('code_challenge') ?? '', redirectUri: url.searchParams.get('redirect_uri') ?? '' });
      const back = new URL(url.searchParams.get('redirect_uri')!);
      back.searchParams.set('code', code);
      back.searchParams.set('state', url.searchParams.get('state') ?? '');
      res.writeHead(302, { location: back.href });
      return res.end();
    }
    if (url.pathname === '/token' && req.method === 'POST') {
      const form = new URLSearchParams(await body(req));
      const basic = Buffer.from((req.headers.authorization ?? '').replace(/^Basic /, ''), 'base64').toString('utf8');
      const [id, secret] = basic.split(':').map(decodeURIComponent);
      if (id !== fake.clientId || secret !== fake.clientSecret) return json(401, { error: 'invalid_client' });
      if (form.get('grant_type') === 'refresh_token') {
        fake.counts.refresh += 1;
        const token = form.get('refresh_token') ?? '';
        if (fake.refreshGate) await fake.refreshGate;
        if (!fake.refreshTokens.has(token)) return json(400, { error: 'invalid_grant', error_description: 'refresh token unknown or used' });
        // Using a successor spends the token it replaced; strict rotation spends this one now.
        const predecessor = predecessors.get(token);
        if (predecessor) fake.refreshTokens.delete(predecessor);
        if (fake.rotation === 'strict') fake.refreshTokens.delete(token);
        const t = issue();
        predecessors.set(t.refresh, token);
        if (fake.beforeRefreshAnswer) await fake.beforeRefreshAnswer();
        return json(200, { access_token: t.access, token_type: 'Bearer', expires_in: fake.expiresIn, refresh_token: t.refresh, ...(fake.answerScope !== null && { scope: fake.answerScope }) });
      }
      if (form.get('grant_type') === 'client_credentials') {
        fake.counts.client += 1;
        if (fake.refreshGate) await fake.refreshGate;
        const t = issue();
        fake.refreshTokens.delete(t.refresh);
        return json(200, { access_token: t.access, token_type: 'Bearer', expires_in: fake.expiresIn, scope: form.get('scope') ?? 'read' });
      }
      if (form.get('grant_type') === 'authorization_code') {
        fake.counts.code += 1;
        if (fake.beforeCodeAnswer) await fake.beforeCodeAnswer();
        const flow = codes.get(form.get('code') ?? '');
        codes.delete(form.get('code') ?? '');
        const verifier = form.get('code_verifier') ?? '';
        const challenge = createHash('sha256').update(verifier).digest('base64url');
        if (!flow || flow.challenge !== challenge || flow.redirectUri !== form.get('redirect_uri')) return json(400, { error: 'invalid_grant' });
        const t = issue();
        return json(200, { access_token: t.access, token_type: 'Bearer', expires_in: fake.expiresIn, refresh_token: t.refresh, ...(fake.answerScope !== null && { scope: fake.answerScope }) });
      }
      return json(400, { error: 'unsupported_grant_type' });
    }
    if (url.pathname === '/items') {
      fake.counts.items += 1;
      const token = (req.headers.authorization ?? '').replace(/^Bearer /, '');
      if (fake.refuseAll || !fake.accessTokens.has(token)) {
        fake.counts.unauthorized += 1;
        return json(401, { message: 'bad token' });
      }
      return json(200, [{ id: '1', name: 'one', updated_at: '2025-01-01T00:00:00Z' }, { id: '2', name: 'two', updated_at: '2025-01-02T00:00:00Z' }]);
    }
    if (url.pathname === '/pages') {
      fake.counts.items += 1;
      const token = (req.headers.authorization ?? '').replace(/^Bearer /, '');
      if (fake.refuseAll || !fake.accessTokens.has(token)) {
        fake.counts.unauthorized += 1;
        return json(401, { message: 'bad token' });
      }
      const used = (uses.get(token) ?? 0) + 1;
      uses.set(token, used);
      if (used >= (fake.expireAfterUses.get(token) ?? Infinity)) fake.accessTokens.delete(token);
      const page = Number(url.searchParams.get('page') ?? '1');
      if (fake.beforePageAnswer) await fake.beforePageAnswer(page);
      const records = page >= 1 && page <= fake.pageCount
        ? Array.from({ length: fake.pageSize }, (_, i) => ({ id: `p${page}-${i}`, name: `record ${page}-${i}`, updated_at: '2025-01-01T00:00:00Z' }))
        : [];
      return json(200, records);
    }
    json(404, { message: 'no such route' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
