// What token endpoint answers the OAuth 2 client takes, against a fake token endpoint on 127.0.0.1
// and real Postgres: an answer carrying an OpenID Connect `id_token` whose issuer is not the token
// URL's origin (Keycloak, Okta, Google, Microsoft, Auth0 once `openid` is asked for) is used as a
// plain OAuth 2 answer, in the code exchange and in a refresh (whose rotated refresh token is the
// one stored); a refresh refused for the OAuth app's client credentials (`invalid_client`,
// `unauthorized_client`, a 401 challenge) is a refusal naming the app, not a transient failure;
// optional members given as null, an empty refresh_token and an expires_in that is no lifetime are
// taken as absent; a scope given as a JSON array is taken as the scopes it names; an error code the
// endpoint answers is quoted short and without the secrets the request sent, and read whatever its
// Content-Type says; a 429 is a rate limit with its Retry-After, refusing nothing; an answer
// form-encoded is read as the same members, tokens and errors alike, and every token request asks
// for JSON; a token answered with any 2xx status is a success, an error so the error it names; a
// refresh_token that is no string refuses the answer, naming the member and the host, quoting no token.
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { credentialProvider } from '../activities/credential-provider';
import { Permanent } from '../connectors/types';
import type { CommandDeps } from '../commands/deps';
import { completeAuthorization, startAuthorization, updateOAuthApp } from '../commands/oauth';
import { open, seal, sealCredentials } from '../lib/credentials';
import { ClientRefused, clientCredentialsToken, exchangeCode, GrantRefused, refreshGrant, TokenRequestFailed, type TokenRequestPolicy } from '../lib/oauth-client';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { TEST_KEYRING, TEST_PROVIDER_POLICY, testActivityDeps } from './helpers/deps';
import { closeFakeServers, serveRaw, serveTls } from './helpers/fake-server';
import { disableConnectionRow } from '../db/models/connections';
import { insertOAuthConnection, storedCredentials } from './helpers/oauth-grants';

const CLIENT_ID = 'client-oidc';
const CLIENT_SECRET = 'client-secret-oidc-0001';
const POLICY: TokenRequestPolicy = { allowPrivate: true, timeoutMs: 5_000, maxResponseBytes: 1 << 20 };
const b64u = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** How the fake answers: tokens (with an id_token when `idToken`), or a refusal. */
interface Mode {
  idToken: boolean;
  /** Leaves `token_type` out of a token answer (an answer no OAuth 2 client may take). */
  noTokenType: boolean;
  refuse: { status: number; error: string; challenge?: string; headers?: Record<string, string> } | null;
  /** Members set on every token answer as given (null included), over the usual ones. */
  extra?: Record<string, unknown>;
  /** Answers with a header section past Node's 16 KiB limit, echoing the client secret (as some endpoint's front end might). */
  hugeHeaders?: boolean;
  /** The client secret the endpoint takes (CLIENT_SECRET unless given: the app's secret rotated at the provider). */
  clientSecret?: string;
  /** Awaited before a request is judged (once it has arrived: `arrived` counts it). */
  hold?: Promise<void>;
  /**
   * Answers tokens and errors form-encoded (`application/x-www-form-urlencoded`, as GitHub's OAuth
   * apps answer a request whose Accept is not JSON), each member's value as its text.
   */
  form?: boolean;
  /** The status of a token answer (200 unless given: 201 Created, as some endpoints answer). */
  tokenStatus?: number;
}

interface FakeIdp {
  url: string;
  mode: Mode;
  /** Refresh tokens the fake still accepts (each is spent by its use: strict rotation). */
  live: Set<string>;
  /** Token requests that have arrived. */
  arrived: number;
  /** The Accept header of each token request, in order. */
  accepts: (string | undefined)[];
  issued: { access_token: string; refresh_token: string }[];
  codes: Map<string, string>;
  close(): Promise<void>;
}

const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });

/** Whether HTTP Basic client authentication names the app (each part form-url-encoded, RFC 6749 2.3.1). */
function clientAuthenticated(header: string | undefined, clientSecret = CLIENT_SECRET): boolean {
  const [id, secret] = Buffer.from((header ?? '').replace(/^Basic /, ''), 'base64').toString('utf8').split(':').map((part) => decodeURIComponent(part.replace(/\+/g, ' ')));
  return id === CLIENT_ID && secret === clientSecret;
}

async function startFakeIdp(): Promise<FakeIdp> {
  const fake: FakeIdp = { url: '', mode: { idToken: false, noTokenType: false, refuse: null }, live: new Set(), arrived: 0, accepts: [], issued: [], codes: new Map(), close: async () => undefined };
  const tokens = () => {
    const refresh_token = `rt_${randomUUID()}`;
    const access_token = `at_${randomUUID()}`;
    fake.live.add(refresh_token);
    fake.issued.push({ access_token, refresh_token });
    const now = Math.floor(Date.now() / 1000);
    const out: Record<string, unknown> = { access_token, refresh_token, token_type: 'Bearer', expires_in: 3600, scope: 'openid read' };
    if (fake.mode.noTokenType) delete out.token_type;
    Object.assign(out, fake.mode.extra ?? {});
    // The OpenID issuer is a realm path, as Keycloak's (`{host}/realms/{realm}`); signed by nobody.
    if (fake.mode.idToken) out.id_token = `${b64u({ alg: 'RS256', typ: 'JWT' })}.${b64u({ iss: `${fake.url}/realms/acme`, sub: 'user-1', aud: CLIENT_ID, iat: now, exp: now + 300 })}.c2ln`;
    return out;
  };
  const server: Server = createServer((req, res) => {
    void readBody(req).then(async (text) => {
      fake.arrived += 1;
      fake.accepts.push(req.headers.accept);
      if (fake.mode.hold) await fake.mode.hold;
      const json = (status: number, value: unknown, headers: Record<string, string> = {}) => {
        const padding = fake.mode.hugeHeaders ? { 'x-padding': `${CLIENT_SECRET} ${'p'.repeat(20 * 1024)}` } : {};
        if (fake.mode.form) {
          const members = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).map(([k, v]): [string, string] => [k, String(v)]);
          res.writeHead(status, { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8', ...padding, ...headers });
          return res.end(new URLSearchParams(members).toString());
        }
        res.writeHead(status, { 'content-type': 'application/json', ...padding, ...headers });
        res.end(JSON.stringify(value));
      };
      const form = new URLSearchParams(text);
      const { refuse } = fake.mode;
      if (refuse) return json(refuse.status, { error: refuse.error }, { ...(refuse.challenge ? { 'www-authenticate': refuse.challenge } : {}), ...refuse.headers });
      if (!clientAuthenticated(req.headers.authorization, fake.mode.clientSecret)) return json(401, { error: 'invalid_client' });
      if (form.get('grant_type') === 'refresh_token') {
        const token = form.get('refresh_token') ?? '';
        if (!fake.live.delete(token)) return json(400, { error: 'invalid_grant' });
        return json(fake.mode.tokenStatus ?? 200, tokens());
      }
      if (form.get('grant_type') === 'authorization_code') {
        const challenge = fake.codes.get(form.get('code') ?? '');
        if (!challenge || challenge !== createHash('sha256').update(form.get('code_verifier') ?? '').digest('base64url')) return json(400, { error: 'invalid_grant' });
        return json(fake.mode.tokenStatus ?? 200, tokens());
      }
      json(400, { error: 'unsupported_grant_type' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return fake;
}

let db: TestDatabase;
let idp: FakeIdp;
beforeAll(async () => {
  db = await createTestDatabase();
  idp = await startFakeIdp();
});
afterAll(async () => {
  await idp?.close();
  await db?.drop();
});
beforeEach(() => {
  idp.mode = { idToken: false, noTokenType: false, refuse: null };
});

const app = () => ({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, tokenUrl: `${idp.url}/token` });
const commandDeps = () => ({ pool: db.pool, credentials: TEST_KEYRING, providers: TEST_PROVIDER_POLICY, maxIntervalSeconds: 86_400 }) as unknown as CommandDeps;
/** Inserts an http connection of tenant acme whose credentials are client credentials at token endpoint `tokenUrl`; answers its id and sealed credentials. */
async function clientCredentialsConnection(tokenUrl: string): Promise<{ id: string; sealed: NonNullable<ReturnType<typeof sealCredentials>> }> {
  const id = randomUUID();
  const secret = { kind: 'oauth2_client_credentials', token_url: tokenUrl, client_id: CLIENT_ID, client_secret: CLIENT_SECRET, scopes: ['read'] };
  const sealed = sealCredentials(TEST_KEYRING, id, secret)!;
  await db.pool.query(
    `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials) values ($1, 'acme', 'http', $2, $3, $4)`,
    [id, `cc-${id.slice(0, 8)}`, { base_url: idp.url, auth: { type: 'bearer' }, resources: {} }, JSON.stringify(sealed)],
  );
  return { id, sealed };
}

async function insertApp(): Promise<string> {
  const id = randomUUID();
  await db.pool.query(
    `insert into oauth_apps (id, tenant_id, name, client_id, client_secret, authorize_url, token_url, redirect_uri, scopes)
     values ($1, 'acme', $2, $3, $4, $5, $6, 'https://example.com/cb', '{openid,read}')`,
    [id, `app-${id.slice(0, 8)}`, CLIENT_ID, seal(TEST_KEYRING, { table: 'oauth_apps', id }, CLIENT_SECRET), `${idp.url}/authorize`, `${idp.url}/token`],
  );
  return id;
}

/** An active oauth2 connection whose access token expires in `seconds` (10: due, refreshed at its next use). */
async function grantConnection(seconds = 10, ofApp?: string) {
  const appId = ofApp ?? (await insertApp());
  const id = randomUUID();
  const refresh = `rt_seed_${randomUUID()}`;
  idp.live.add(refresh);
  const secret = { kind: 'oauth2', access_token: `at_seed_${randomUUID()}`, refresh_token: refresh, expires_at: new Date(Date.now() + seconds * 1000).toISOString(), scopes: ['read'] };
  const sealed = sealCredentials(TEST_KEYRING, id, secret)!;
  await insertOAuthConnection(db.pool, { id, tenantId: 'acme', appKey: `c-${id.slice(0, 8)}`, config: { base_url: idp.url, auth: { type: 'bearer' }, resources: {} }, appId, sealed });
  return { id, appId, refresh, sealed };
}

/** A connection of a new app that needs reauthorization, through the whole connect flow (the fake consenting): its id and the flow's answer. */
async function connectFlow() {
  const appId = await insertApp();
  const id = randomUUID();
  await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config, status) values ($1, 'acme', 'http', $2, $3, 'needs_reauth')`, [
    id, `f-${id.slice(0, 8)}`, { base_url: idp.url, auth: { type: 'bearer' }, resources: {} },
  ]);
  const start = await startAuthorization(commandDeps(), id, { appId });
  const url = new URL(start.authorization_url);
  const code = `code_${randomUUID()}`;
  idp.codes.set(code, url.searchParams.get('code_challenge')!);
  return { id, done: await completeAuthorization(commandDeps(), { state: url.searchParams.get('state')!, code }) };
}

async function stored(connectionId: string) {
  const row = (await storedCredentials(db.pool, connectionId))!;
  return { status: row.status, secret: JSON.parse(open(TEST_KEYRING, { table: 'connections', id: row.boundTo }, row.credentials as string)) as Record<string, unknown> };
}

describe('token answers carrying an OpenID Connect id_token of another issuer', () => {
  it('a refresh answer with an id_token of another issuer is taken as a plain OAuth 2 answer: its rotated refresh token is returned', async () => {
    idp.mode.idToken = true;
    const seed = `rt_seed_${randomUUID()}`;
    idp.live.add(seed);
    const answer = await refreshGrant(app(), seed, POLICY);
    expect(answer).toEqual({ ...idp.issued.at(-1)!, expires_in: 3600, scope: 'openid read' });
    expect(answer).not.toHaveProperty('id_token');
  });

  it('a refresh through the credential provider stores the rotated refresh token, and the next refresh spends it', async () => {
    idp.mode.idToken = true;
    const conn = await grantConnection();
    const { deps } = testActivityDeps({ pool: db.pool });
    const credential = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current();
    const first = idp.issued.at(-1)!;
    expect(credential).toEqual({ token: first.access_token });
    const after = await stored(conn.id);
    expect(after).toMatchObject({ status: 'active', secret: { access_token: first.access_token, refresh_token: first.refresh_token } });
    expect(idp.live.has(conn.refresh)).toBe(false);

    // The stored token is the one the provider still accepts: a provider refusing the access token refreshes with it.
    const provider = credentialProvider(deps, conn.id, (await storedCredentials(db.pool, conn.id))!.credentials, conn.id);
    const renewed = await provider.renewed(await provider.current());
    expect(renewed).toEqual({ token: idp.issued.at(-1)!.access_token });
    expect((await stored(conn.id)).secret.refresh_token).toBe(idp.issued.at(-1)!.refresh_token);
  });

  it('the connect flow exchanging a code answered with an id_token of another issuer stores the grant and makes the connection active', async () => {
    idp.mode.idToken = true;
    const { id, done } = await connectFlow();
    expect(done).toEqual({ connection_id: id, status: 'active' });
    const issued = idp.issued.at(-1)!;
    expect((await stored(id)).secret).toMatchObject({ access_token: issued.access_token, refresh_token: issued.refresh_token });
  });

  it('an answer without token_type (LinkedIn answers so) is a bearer token: a refresh keeps the rotated refresh token, and the connect flow stores the grant', async () => {
    for (const idToken of [false, true]) {
      idp.mode = { idToken, noTokenType: true, refuse: null };
      const seed = `rt_seed_${randomUUID()}`;
      idp.live.add(seed);
      const answer = await refreshGrant(app(), seed, POLICY).then((a) => a, (e: Error) => e);
      expect(answer, `id_token: ${idToken}`).toEqual({ ...idp.issued.at(-1)!, expires_in: 3600, scope: 'openid read' });
    }
    idp.mode = { idToken: false, noTokenType: true, refuse: null };
    const { id, done } = await connectFlow();
    expect(done).toEqual({ connection_id: id, status: 'active' });
    expect((await stored(id)).secret).toMatchObject({ access_token: idp.issued.at(-1)!.access_token, refresh_token: idp.issued.at(-1)!.refresh_token });
  });

  it('every other check of the answer stays: an answer without an access token, or with a token_type that is not a string, is refused', async () => {
    for (const extra of [{ access_token: undefined }, { access_token: 42 }, { token_type: 7 }]) {
      idp.mode = { idToken: false, noTokenType: false, refuse: null, extra };
      const seed = `rt_seed_${randomUUID()}`;
      idp.live.add(seed);
      await expect(refreshGrant(app(), seed, POLICY), JSON.stringify(extra)).rejects.toBeInstanceOf(TokenRequestFailed);
    }
  });
});

describe('token answers with optional members null, or an expires_in that is no lifetime', () => {
  it('a refresh answered with expires_in, scope or refresh_token null, or expires_in -1 or "never", is taken with those members absent: the rotated refresh token is kept', async () => {
    for (const extra of [{ expires_in: null }, { scope: null }, { expires_in: -1 }, { expires_in: 'never' }, { expires_in: null, scope: null }]) {
      idp.mode.extra = extra;
      const seed = `rt_seed_${randomUUID()}`;
      idp.live.add(seed);
      const answer = await refreshGrant(app(), seed, POLICY).then((a) => a, (e: Error) => e);
      const issued = idp.issued.at(-1)!;
      const expected: Record<string, unknown> = { ...issued, expires_in: 3600, scope: 'openid read' };
      for (const key of Object.keys(extra)) delete expected[key];
      expect(answer, JSON.stringify(extra)).toEqual(expected);
    }
    // A refresh token given as null is no rotation: the credential keeps the one it had.
    idp.mode.extra = { refresh_token: null };
    const conn = await grantConnection();
    const { deps } = testActivityDeps({ pool: db.pool });
    const credential = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then((c) => c, (e: Error) => e);
    expect(credential).toEqual({ token: idp.issued.at(-1)!.access_token });
    expect((await stored(conn.id)).secret.refresh_token).toBe(conn.refresh);
  });
});

describe('token answers with an empty refresh_token (as Tailscale\'s tsidp answers when it issues none)', () => {
  it('a refresh answered with refresh_token "" is taken without one: the access token is used and the credential keeps its refresh token', async () => {
    idp.mode.extra = { refresh_token: '' };
    const seed = `rt_seed_${randomUUID()}`;
    idp.live.add(seed);
    const answer = await refreshGrant(app(), seed, POLICY).then((a) => a, (e: Error) => e);
    expect(answer).toEqual({ access_token: idp.issued.at(-1)!.access_token, refresh_token: undefined, expires_in: 3600, scope: 'openid read' });
    const conn = await grantConnection();
    idp.mode.extra = { refresh_token: '' };
    const { deps } = testActivityDeps({ pool: db.pool });
    const credential = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then((c) => c, (e: Error) => e);
    expect(credential).toEqual({ token: idp.issued.at(-1)!.access_token });
    expect((await stored(conn.id)).secret).toMatchObject({ access_token: idp.issued.at(-1)!.access_token, refresh_token: conn.refresh });
  });
});

describe('token answers whose scope is a JSON array (as Twitch answers it)', () => {
  it('a refresh answered with scope ["openid", "read"] is taken with the scopes it names: the rotated refresh token is stored, and its scopes', async () => {
    idp.mode.extra = { scope: ['openid', 'read'] };
    const seed = `rt_seed_${randomUUID()}`;
    idp.live.add(seed);
    const answer = await refreshGrant(app(), seed, POLICY).then((a) => a, (e: Error) => e);
    expect(answer).toEqual({ ...idp.issued.at(-1)!, expires_in: 3600, scope: 'openid read' });
    const conn = await grantConnection();
    const { deps } = testActivityDeps({ pool: db.pool });
    const credential = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then((c) => c, (e: Error) => e);
    expect(credential).toEqual({ token: idp.issued.at(-1)!.access_token });
    expect((await stored(conn.id)).secret).toMatchObject({ refresh_token: idp.issued.at(-1)!.refresh_token, scopes: ['openid', 'read'] });
  });

  it('the connect flow exchanging a code answered with an array scope stores the grant and makes the connection active', async () => {
    idp.mode.extra = { scope: ['openid', 'read'] };
    const appId = await insertApp();
    const id = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config, status) values ($1, 'acme', 'http', $2, '{}', 'needs_reauth')`, [id, `flow-${id.slice(0, 8)}`]);
    const start = await startAuthorization(commandDeps(), id, { appId });
    const url = new URL(start.authorization_url);
    const code = `code_${randomUUID()}`;
    idp.codes.set(code, url.searchParams.get('code_challenge')!);
    const done = await completeAuthorization(commandDeps(), { state: url.searchParams.get('state')!, code }).then((d) => d, (e: Error) => e);
    expect(done).toEqual({ connection_id: id, status: 'active' });
    expect((await stored(id)).secret).toMatchObject({ access_token: idp.issued.at(-1)!.access_token, scopes: ['openid', 'read'] });
  });
});

describe('errors answered with status 200 (as GitHub\'s OAuth token endpoint answers them)', () => {
  it('a refresh answered 200 {"error": "bad_refresh_token"} or 200 {"error": "invalid_grant"} is the grant refused, and the connection needs reauthorization', async () => {
    for (const error of ['bad_refresh_token', 'invalid_grant']) {
      idp.mode.refuse = { status: 200, error };
      const err = await refreshGrant(app(), 'rt_any', POLICY).then(() => null, (e: Error) => e);
      expect(err, error).toBeInstanceOf(GrantRefused);
      expect(err!.message).toContain(`answered 200 ${error}`);
    }
    idp.mode.refuse = { status: 200, error: 'incorrect_client_credentials' };
    expect(await refreshGrant(app(), 'rt_any', POLICY).then(() => null, (e: Error) => e)).toBeInstanceOf(ClientRefused);
    idp.mode.refuse = { status: 200, error: 'bad_refresh_token' };
    const conn = await grantConnection();
    const { deps } = testActivityDeps({ pool: db.pool });
    const err = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then(() => null, (e: Error) => e);
    expect(err?.name).toBe('CredentialsInvalid');
    expect((await stored(conn.id)).status).toBe('needs_reauth');
  });
});

describe('errors answered with a Content-Type other than application/json', () => {
  const types = ['text/plain', 'text/html; charset=utf-8', 'application/problem+json', 'Application/JSON', 'application/json ; charset=utf-8', null];
  const refusal = (error: string, type: string | null) => ({ status: 400, error, headers: type === null ? { 'content-type': '' } : { 'content-type': type } });

  it('a refresh answered 400 {"error": "invalid_grant"} as text/plain, text/html, problem+json, in other letter case or with no type is the grant refused; invalid_client the client refused', async () => {
    for (const type of types) {
      idp.mode.refuse = refusal('invalid_grant', type);
      const err = await refreshGrant(app(), 'rt_any', POLICY).then(() => null, (e: Error) => e);
      expect(err, `${type}: ${err?.message}`).toBeInstanceOf(GrantRefused);
      expect(err!.message).toContain('answered 400 invalid_grant');
      idp.mode.refuse = refusal('invalid_client', type);
      expect(await refreshGrant(app(), 'rt_any', POLICY).then(() => null, (e: Error) => e), String(type)).toBeInstanceOf(ClientRefused);
    }
  });

  it('through the credential provider: a revoked grant so answered needs reauthorization (with its alert) instead of failing as transient on every run', async () => {
    idp.mode.refuse = refusal('invalid_grant', 'text/plain');
    const conn = await grantConnection();
    const { deps } = testActivityDeps({ pool: db.pool });
    const err = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then(() => null, (e: Error) => e);
    expect(err?.name, err?.message).toBe('CredentialsInvalid');
    expect((await stored(conn.id)).status).toBe('needs_reauth');
    const alerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [conn.id]);
    expect(alerts.rowCount).toBe(1);
  });

  it('a client credentials request and a code exchange so refused are refusals too; a 503 so answered stays transient', async () => {
    idp.mode.refuse = refusal('invalid_client', 'text/plain');
    expect(await clientCredentialsToken(app(), [], POLICY).then(() => null, (e: Error) => e)).toBeInstanceOf(GrantRefused);
    idp.mode.refuse = refusal('invalid_grant', 'text/html');
    const exchange = { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, authorizeUrl: `${idp.url}/authorize`, tokenUrl: `${idp.url}/token`, redirectUri: 'https://example.com/cb' };
    expect(await exchangeCode(exchange, { code: 'code_any', state: 'state_any' }, 'verifier_any_verifier_any_verifier_any_0001', POLICY).then(() => null, (e: Error) => e)).toBeInstanceOf(GrantRefused);
    idp.mode.refuse = { status: 503, error: 'temporarily_unavailable', headers: { 'content-type': 'text/plain' } };
    const unavailable = await refreshGrant(app(), 'rt_any', POLICY).then(() => null, (e: Error) => e);
    expect(unavailable).toBeInstanceOf(TokenRequestFailed);
    expect(unavailable).not.toBeInstanceOf(GrantRefused);
  });
});

describe('a token endpoint rate-limiting the token request (429)', () => {
  it("a refresh and a client credentials token fail as rate-limited with the endpoint's Retry-After; nothing is refused and the refresh token is not spent", async () => {
    const { deps } = testActivityDeps({ pool: db.pool });
    const conn = await grantConnection();
    const client = await clientCredentialsConnection(`${idp.url}/token`);
    for (const [what, run] of [
      ['refresh', () => credentialProvider(deps, conn.id, conn.sealed, conn.id).current()],
      ['client credentials', () => credentialProvider(deps, client.id, client.sealed).current()],
    ] as const) {
      idp.mode.refuse = { status: 429, error: 'too_many_requests', headers: { 'retry-after': '120' } };
      const err = await run().then(() => null, (e: Error & { retryAfterSeconds?: number }) => e);
      expect(err?.name, what).toBe('RateLimited');
      expect(err?.retryAfterSeconds, what).toBe(120);
      expect(err?.message).not.toContain(CLIENT_SECRET);
    }
    expect((await stored(conn.id)).status).toBe('active');
    expect((await stored(client.id)).status).toBe('active');
    expect(idp.live.has(conn.refresh)).toBe(true);
  });
});

describe("a refresh refused for the OAuth app's client credentials", () => {
  it('invalid_client, unauthorized_client and a 401 Basic challenge are ClientRefused (a GrantRefused) naming the app, not TokenRequestFailed', async () => {
    const refusals = [
      { status: 401, error: 'invalid_client' },
      { status: 400, error: 'unauthorized_client' },
      { status: 401, error: 'invalid_client', challenge: 'Basic realm="token"' },
    ];
    for (const refuse of refusals) {
      idp.mode.refuse = refuse;
      const err = await refreshGrant(app(), 'rt_any', POLICY).then(() => null, (e: Error) => e);
      expect(err, JSON.stringify(refuse)).toBeInstanceOf(ClientRefused);
      expect(err).toBeInstanceOf(GrantRefused);
      expect(err!.message).toMatch(/OAuth app's client credentials were refused/);
      expect(err!.message).not.toContain(CLIENT_SECRET);
    }
  });

  it('invalid_grant stays a GrantRefused of the grant, and a 503 temporarily_unavailable stays transient', async () => {
    const grant = await refreshGrant(app(), 'rt_unknown', POLICY).then(() => null, (e: Error) => e);
    expect(grant).toBeInstanceOf(GrantRefused);
    expect(grant).not.toBeInstanceOf(ClientRefused);
    idp.mode.refuse = { status: 503, error: 'temporarily_unavailable' };
    expect(await refreshGrant(app(), 'rt_any', POLICY).then(() => null, (e: Error) => e)).toBeInstanceOf(TokenRequestFailed);
  });

  it('through the credential provider: the connection needs reauthorization with its alert, the reason naming the OAuth app', async () => {
    const conn = await grantConnection();
    idp.mode.refuse = { status: 401, error: 'invalid_client' };
    const { deps } = testActivityDeps({ pool: db.pool });
    const err = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then(() => null, (e: Error) => e);
    expect(err?.name).toBe('CredentialsInvalid');
    expect(err?.message).toMatch(/invalid_client: the OAuth app's client credentials were refused \(PATCH the OAuth app/);
    expect((await stored(conn.id)).status).toBe('needs_reauth');
    const alerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [conn.id]);
    expect(alerts.rowCount).toBe(1);
    // The refresh token was not spent: nothing was lost.
    expect(idp.live.has(conn.refresh)).toBe(true);
  });

  it("a PATCH of the refused OAuth app's client secret gives its connections refused for that client back their status, alerts resolved, and the next run refreshes with the new secret; one refused for its grant still needs reconnecting", async () => {
    const { deps } = testActivityDeps({ pool: db.pool });
    const byClient = await grantConnection();
    const byGrant = await grantConnection(10, byClient.appId);
    // A connection of the app is refused for its own grant (its refresh token revoked).
    idp.live.delete(byGrant.refresh);
    const revoked = await credentialProvider(deps, byGrant.id, byGrant.sealed, byGrant.id).current().then(() => null, (e: Error) => e);
    expect(revoked?.message).toMatch(/invalid_grant/);
    // Then the app's secret is rotated at the provider: the stored one is refused from now on.
    const rotated = `client-secret-rotated-${randomUUID().slice(0, 8)}`;
    idp.mode.clientSecret = rotated;
    const refused = await credentialProvider(deps, byClient.id, byClient.sealed, byClient.id).current().then(() => null, (e: Error) => e);
    expect(refused?.message).toMatch(/invalid_client/);
    expect([(await stored(byClient.id)).status, (await stored(byGrant.id)).status]).toEqual(['needs_reauth', 'needs_reauth']);
    // A third connection of the app, refused for its client too, is disabled meanwhile (keeping the refusal).
    const disabled = await grantConnection(10, byClient.appId);
    expect((await credentialProvider(deps, disabled.id, disabled.sealed, disabled.id).current().then(() => null, (e: Error) => e))?.message).toMatch(/invalid_client/);
    await disableConnectionRow(db.pool, disabled.id);

    // A change of what is not the client (scopes) resumes nothing; the new secret does.
    await updateOAuthApp(commandDeps(), byClient.appId, { scopes: ['read', 'write'] });
    expect((await stored(byClient.id)).status).toBe('needs_reauth');
    await updateOAuthApp(commandDeps(), byClient.appId, { clientSecret: rotated });
    expect([(await stored(byClient.id)).status, (await stored(byGrant.id)).status]).toEqual(['active', 'needs_reauth']);
    const open = async (id: string) => (await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [id])).rowCount;
    expect([await open(byClient.id), await open(byGrant.id)]).toEqual([0, 1]);
    // The disabled one stays disabled, its refusal ended: a resume would make it active.
    expect((await db.pool.query('select status, status_before_reauth from connections where id = $1', [disabled.id])).rows[0]).toEqual({ status: 'disabled', status_before_reauth: null });
    // The refresh token was never spent: the next run refreshes with the new secret.
    const retried = await credentialProvider(deps, byClient.id, byClient.sealed, byClient.id).current();
    expect(retried).toEqual({ token: idp.issued.at(-1)!.access_token });
  });

  it("refused with the client secret the OAuth app held before a PATCH gave it a new one while the endpoint answered: nothing is refused, the run is tried again and refreshes with the new secret", async () => {
    const conn = await grantConnection();
    let release!: () => void;
    idp.mode.hold = new Promise<void>((resolve) => (release = resolve));
    const before = idp.arrived;
    const { deps } = testActivityDeps({ pool: db.pool });
    const run = credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then(() => null, (e: Error & { nonRetryable?: boolean }) => e);
    while (idp.arrived === before) await new Promise((r) => setTimeout(r, 20));
    // While the token endpoint answers: the client secret is rotated at the provider (the old one
    // refused from now on) and the OAuth app is given the new one.
    const rotated = 'client-secret-oidc-0002';
    idp.mode.clientSecret = rotated;
    await updateOAuthApp(commandDeps(), conn.appId, { clientSecret: rotated });
    release();
    const err = await run;
    idp.mode.hold = undefined;
    // The refusal was of a client secret the app no longer holds: nothing to reconnect, try again.
    expect(err?.name).toBe('Transient');
    expect(err?.message).toMatch(/replaced/);
    expect((await stored(conn.id)).status).toBe('active');
    const alerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid'`, [conn.id]);
    expect(alerts.rowCount).toBe(0);
    // The retry refreshes the grant with the new secret: its refresh token was never spent.
    expect(idp.live.has(conn.refresh)).toBe(true);
    const retried = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current();
    expect(retried).toEqual({ token: idp.issued.at(-1)!.access_token });
    expect((await stored(conn.id)).secret.refresh_token).toBe(idp.issued.at(-1)!.refresh_token);
  });
});

describe('a refresh refused while a connect flow replaces the grant', () => {
  /** Backends of the test database waiting on a lock (a row's, a transaction's or an advisory one). */
  const waitingOnLocks = async () =>
    (await db.pool.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rows[0]!.n;
  const untilWaiting = async (n: number) => {
    while ((await waitingOnLocks()) < n) await new Promise((r) => setTimeout(r, 20));
  };

  it('invalid_grant for the old refresh token, answered while the connect flow commits the new grant, marks nothing: the connection stays active with its new tokens', async () => {
    const conn = await grantConnection();
    // Holds the connect flow's transaction open after it wrote the new grant and the connection
    // (at the resolution of the connection's alert), as a busy database would for a moment.
    await db.pool.query(`insert into alerts (category, severity, connection_id, context) values ('connection_credentials_invalid', 'warning', $1, '{}')`, [conn.id]);
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query(`select 1 from alerts where connection_id = $1 and resolved_at is null for update`, [conn.id]);
      // A run's refresh of the old grant reaches the token endpoint, which holds it.
      let release!: () => void;
      idp.mode.hold = new Promise<void>((resolve) => (release = resolve));
      const before = idp.arrived;
      const { deps } = testActivityDeps({ pool: db.pool });
      const run = credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then(() => null, (e: Error) => e);
      while (idp.arrived === before) await new Promise((r) => setTimeout(r, 20));
      idp.mode.hold = undefined;
      // Meanwhile the person reconnects (the same OAuth app): the grant's tokens are replaced.
      const start = await startAuthorization(commandDeps(), conn.id, { appId: conn.appId });
      const url = new URL(start.authorization_url);
      const code = `code_${randomUUID()}`;
      idp.codes.set(code, url.searchParams.get('code_challenge')!);
      const connect = completeAuthorization(commandDeps(), { state: url.searchParams.get('state')!, code });
      await untilWaiting(1);
      // The provider refuses the old refresh token (the new authorization revoked it) while the
      // connect flow has not committed yet.
      idp.live.delete(conn.refresh);
      release();
      await untilWaiting(2);
      await holder.query('rollback');
      expect(await connect).toEqual({ connection_id: conn.id, status: 'active' });
      const err = await run;
      // The refusal was of the tokens the connect flow replaced: the connection keeps the new ones.
      const now = await stored(conn.id);
      expect(now.secret.refresh_token).toBe(idp.issued.at(-1)!.refresh_token);
      expect(now.status).toBe('active');
      expect(err?.name).toBe('Transient');
      expect(err?.message).toMatch(/replaced/);
      const open = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [conn.id]);
      expect(open.rowCount).toBe(0);
    } finally {
      await holder.query('rollback').catch(() => undefined);
      holder.release();
    }
  });
});

describe('the error code a token endpoint answers, quoted in messages', () => {
  // A tenant aims the token URL: its endpoint may answer any text as `error`, as long as its whole
  // answer, echoing what it was sent.
  const echoing = (sent: string[]) => ({ status: 400, error: `invalid_request ${[CLIENT_SECRET, ...sent].join(' ')} ${'x'.repeat(200_000)}` });

  it('is redacted of the client secret and the grant sent, then cut: a refresh, a client credentials request and a code exchange', async () => {
    const refresh = 'rt_echoed_0123456789';
    const code = 'code_echoed_0123456789';
    const verifier = 'verifier_echoed_0123456789_0123456789_0123456789';
    idp.mode.refuse = echoing([refresh, code, verifier]);
    const full = { ...app(), authorizeUrl: `${idp.url}/authorize`, redirectUri: 'https://example.com/cb' };
    const requests = {
      refresh: () => refreshGrant(app(), refresh, POLICY),
      clientCredentials: () => clientCredentialsToken(app(), [], POLICY),
      exchange: () => exchangeCode(full, { code, state: 'state-1' }, verifier, POLICY),
    };
    for (const [name, request] of Object.entries(requests)) {
      const err = await request().then(() => null, (e: Error) => e);
      expect(err, name).toBeInstanceOf(TokenRequestFailed);
      expect(err!.message, name).toMatch(/^the token endpoint answered 400 invalid_request /);
      expect(err!.message.length, name).toBeLessThanOrEqual(200);
      expect(err!.message, name).not.toContain(CLIENT_SECRET);
      if (name === 'refresh') expect(err!.message).not.toContain(refresh);
      if (name === 'exchange') expect(err!.message).not.toContain(code);
    }
  });

  it("through the credential provider: the refresh's failure, which becomes the job's error, is short and holds no client secret", async () => {
    const conn = await grantConnection();
    idp.mode.refuse = echoing([]);
    const { deps } = testActivityDeps({ pool: db.pool });
    const err = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then(() => null, (e: Error) => e);
    expect(err?.message).toMatch(/^oauth2: refreshing the access token failed: the token endpoint answered 400 invalid_request /);
    expect(err!.message.length).toBeLessThanOrEqual(300);
    expect(err!.message).not.toContain(CLIENT_SECRET);
  });
});

describe("a token endpoint answering a header section past Node's 16 KiB limit (HPE_HEADER_OVERFLOW)", () => {
  const LIMIT = "its response headers exceed 16384 bytes (16 KiB), Node's limit on a response's header section (--max-http-header-size)";

  it('a refresh, a client credentials request and a code exchange fail naming the limit and the endpoint\'s host, without the client secret', async () => {
    idp.mode.hugeHeaders = true;
    const seed = `rt_seed_${randomUUID()}`;
    idp.live.add(seed);
    const full = { ...app(), authorizeUrl: `${idp.url}/authorize`, redirectUri: 'https://example.com/cb' };
    const requests = {
      refresh: () => refreshGrant(app(), seed, POLICY),
      clientCredentials: () => clientCredentialsToken(app(), [], POLICY),
      exchange: () => exchangeCode(full, { code: 'code-1', state: 'state-1' }, 'verifier_0123456789_0123456789_0123456789_0123', POLICY),
    };
    for (const [name, request] of Object.entries(requests)) {
      const err = await request().then(() => null, (e: Error) => e);
      expect(err, name).toBeInstanceOf(TokenRequestFailed);
      expect(err!.message, name).toBe(`the token endpoint at '127.0.0.1' answered, but ${LIMIT}`);
      expect(err!.message, name).not.toContain(CLIENT_SECRET);
    }
  });

  it('through the credential provider: a refresh and a client credentials token fail for good (Permanent), naming the limit; the connection is not refused', async () => {
    const conn = await grantConnection();
    idp.mode.hugeHeaders = true;
    const { deps } = testActivityDeps({ pool: db.pool });
    const refresh = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then(() => null, (e: Error) => e);
    expect(refresh).toBeInstanceOf(Permanent);
    expect(refresh!.message).toBe(`oauth2: refreshing the access token failed: the token endpoint at '127.0.0.1' answered, but ${LIMIT}`);
    expect((await stored(conn.id)).status).toBe('active');

    const { id, sealed } = await clientCredentialsConnection(`${idp.url}/token`);
    const client = await credentialProvider(deps, id, sealed).current().then(() => null, (e: Error) => e);
    expect(client).toBeInstanceOf(Permanent);
    expect(client!.message).toBe(`oauth2 client credentials: obtaining a token failed: the token endpoint at '127.0.0.1' answered, but ${LIMIT}`);
    expect(client!.message).not.toContain(CLIENT_SECRET);
  });
});

describe('a token endpoint answering malformed HTTP (a parser error other than oversized headers)', () => {
  // A header name with a space: Node's parser refuses it (HPE_INVALID_HEADER_TOKEN), and the
  // endpoint answers so on every retry.
  const ANSWER = 'HTTP/1.1 200 OK\r\nBad Header: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}';
  const WORDS = 'its response is not valid HTTP: a header name or value holds a character HTTP does not allow (HPE_INVALID_HEADER_TOKEN)';

  afterEach(async () => {
    await closeFakeServers();
  });

  it('a refresh, a client credentials request and a code exchange fail naming what was wrong and the host, without the client secret', async () => {
    const raw = await serveRaw(ANSWER);
    const requests = tokenRequests(raw.url);
    for (const [name, request] of Object.entries(requests)) {
      const err = await request().then(() => null, (e: Error) => e);
      expect(err, name).toBeInstanceOf(TokenRequestFailed);
      expect(err!.message, name).toBe(`the token endpoint at '127.0.0.1' answered, but ${WORDS}`);
      expect(err!.message, name).not.toContain(CLIENT_SECRET);
    }
    expect(raw.requests).toHaveLength(3);
  });

  it('through the credential provider: a client credentials token fails for good (Permanent), naming what was wrong', async () => {
    const raw = await serveRaw(ANSWER);
    const { deps } = testActivityDeps({ pool: db.pool });
    const { id, sealed } = await clientCredentialsConnection(`${raw.url}/token`);
    const client = await credentialProvider(deps, id, sealed).current().then(() => null, (e: Error) => e);
    expect(client).toBeInstanceOf(Permanent);
    expect(client!.message).toBe(`oauth2 client credentials: obtaining a token failed: the token endpoint at '127.0.0.1' answered, but ${WORDS}`);
    expect(client!.message).not.toContain(CLIENT_SECRET);
  });
});

/** The three token requests of an app whose endpoints are on `base`: a refresh, a client credentials request and a code exchange. */
function tokenRequests(base: string) {
  const at = { ...app(), tokenUrl: `${base}/token` };
  const full = { ...at, authorizeUrl: `${base}/authorize`, redirectUri: 'https://example.com/cb' };
  return {
    refresh: () => refreshGrant(at, `rt_seed_${randomUUID()}`, POLICY),
    clientCredentials: () => clientCredentialsToken(at, [], POLICY),
    exchange: () => exchangeCode(full, { code: 'code-1', state: 'state-1' }, 'verifier_0123456789_0123456789_0123456789_0123', POLICY),
  };
}

describe('a token endpoint whose TLS certificate is refused (expired, self-signed)', () => {
  afterEach(async () => {
    await closeFakeServers();
  });

  it('a refresh, a client credentials request and a code exchange fail naming the host and why, with Node\'s code; through the credential provider a client credentials token fails for good (Permanent)', async () => {
    const cases = [
      { certificate: 'expired', words: 'has expired (CERT_HAS_EXPIRED)' },
      { certificate: 'self-signed', words: 'is self-signed, not trusted (DEPTH_ZERO_SELF_SIGNED_CERT)' },
    ] as const;
    const { deps } = testActivityDeps({ pool: db.pool });
    for (const { certificate, words } of cases) {
      const endpoint = await serveTls(certificate, (_req, res) => res.end('{}'));
      const requests = tokenRequests(endpoint.url);
      for (const [name, request] of Object.entries(requests)) {
        const err = await request().then(() => null, (e: Error) => e);
        expect(err, `${certificate} ${name}`).toBeInstanceOf(TokenRequestFailed);
        expect(err!.message, `${certificate} ${name}`).toBe(`the token request failed: the certificate of 127.0.0.1 ${words}`);
      }
      const { id, sealed } = await clientCredentialsConnection(`${endpoint.url}/token`);
      const client = await credentialProvider(deps, id, sealed).current().then(() => null, (e: Error) => e);
      expect(client, certificate).toBeInstanceOf(Permanent);
      expect(client!.message, certificate).toBe(`oauth2 client credentials: obtaining a token failed: the token request failed: the certificate of 127.0.0.1 ${words}`);
      expect(endpoint.requests, certificate).toHaveLength(0);
    }
  });
});

describe('an OAuth app whose token_url names a host PROVIDER_HOSTS does not allow (stored before the rule, or PROVIDER_HOSTS changed since)', () => {
  const ELSEWHERE = 'https://tokens.elsewhere.example/token';
  const WORDS = "token_url: host 'tokens.elsewhere.example' is not an allowed provider host (PROVIDER_HOSTS)";

  it('a refresh fails for good (Permanent) naming the field and PROVIDER_HOSTS, sending nothing; the connection is not refused', async () => {
    const conn = await grantConnection();
    await db.pool.query('update oauth_apps set token_url = $1 where id = (select oauth_app_id from connections where id = $2)', [ELSEWHERE, conn.id]);
    const requests = idp.issued.length;
    const { deps } = testActivityDeps({ pool: db.pool });
    const err = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then(() => null, (e: Error) => e);
    expect(err).toBeInstanceOf(Permanent);
    expect(err!.message).toBe(`oauth2: the OAuth app's ${WORDS}; PATCH the OAuth app`);
    expect(idp.issued.length).toBe(requests);
    expect((await stored(conn.id)).status).toBe('active');
  });

  it('the connect flow is refused at its start (400 naming the field), before a person is sent to consent', async () => {
    const appId = await insertApp();
    await db.pool.query('update oauth_apps set token_url = $1 where id = $2', [ELSEWHERE, appId]);
    const id = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config, status) values ($1, 'acme', 'http', $2, $3, 'needs_reauth')`, [
      id, `h-${id.slice(0, 8)}`, { base_url: idp.url, auth: { type: 'bearer' }, resources: {} },
    ]);
    const err = await startAuthorization(commandDeps(), id, { appId }).then(() => null, (e: Error) => e);
    expect(err).toMatchObject({ message: `the OAuth app's ${WORDS}; PATCH the OAuth app` });
    expect(err).toMatchObject({ reason: 'invalid', code: 'invalid_request' });
    const { rows } = await db.pool.query('select 1 from oauth_states where connection_id = $1', [id]);
    expect(rows).toHaveLength(0);
  });
});

/**
 * Through the credential provider, a refresh of `conn`'s grant stores the rotated refresh token;
 * then a connect flow exchanging a code stores the grant it was answered (both as the endpoint
 * issued them, whatever shape the endpoint's mode gives its answers).
 */
async function expectRefreshAndConnectStored(conn: Awaited<ReturnType<typeof grantConnection>>): Promise<void> {
  const { deps } = testActivityDeps({ pool: db.pool });
  const credential = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then((c) => c, (e: Error) => e);
  const refreshed = idp.issued.at(-1)!;
  expect(credential).toEqual({ token: refreshed.access_token });
  expect(await stored(conn.id)).toMatchObject({ status: 'active', secret: { access_token: refreshed.access_token, refresh_token: refreshed.refresh_token } });

  const { id, done } = await connectFlow().then((f) => f, (e: Error) => ({ id: null, done: e }));
  expect(done).toEqual({ connection_id: id, status: 'active' });
  const issued = idp.issued.at(-1)!;
  expect((await stored(id!)).secret).toMatchObject({ access_token: issued.access_token, refresh_token: issued.refresh_token, scopes: ['openid', 'read'] });
}

describe('token answers form-encoded (application/x-www-form-urlencoded: GitHub\'s OAuth apps answer so a request not asking for JSON, some older providers always)', () => {
  it('a refresh answered form-encoded is read as the same members, expires_in a number: the rotated refresh token is returned', async () => {
    idp.mode.form = true;
    const seed = `rt_seed_${randomUUID()}`;
    idp.live.add(seed);
    const answer = await refreshGrant(app(), seed, POLICY).then((a) => a, (e: Error) => e);
    expect(answer).toEqual({ ...idp.issued.at(-1)!, expires_in: 3600, scope: 'openid read' });
  });

  it('through the credential provider the rotated refresh token is stored, and the connect flow exchanging a code stores the grant', async () => {
    const conn = await grantConnection();
    idp.mode.form = true;
    await expectRefreshAndConnectStored(conn);
  });

  it('a form-encoded answer passes the same checks as a JSON one: no access_token or a token_type not bearer is refused; an empty refresh_token or an expires_in that is no lifetime is taken as absent', async () => {
    for (const extra of [{ access_token: undefined }, { token_type: 'mac' }]) {
      idp.mode = { idToken: false, noTokenType: false, refuse: null, form: true, extra };
      const seed = `rt_seed_${randomUUID()}`;
      idp.live.add(seed);
      await expect(refreshGrant(app(), seed, POLICY), JSON.stringify(extra)).rejects.toBeInstanceOf(TokenRequestFailed);
    }
    for (const extra of [{ refresh_token: '' }, { expires_in: 'never' }, { expires_in: '0' }]) {
      idp.mode = { idToken: false, noTokenType: false, refuse: null, form: true, extra };
      const seed = `rt_seed_${randomUUID()}`;
      idp.live.add(seed);
      const answer = await refreshGrant(app(), seed, POLICY).then((a) => a, (e: Error) => e);
      const expected: Record<string, unknown> = { ...idp.issued.at(-1)!, expires_in: 3600, scope: 'openid read' };
      for (const key of Object.keys(extra)) expected[key] = undefined;
      expect(answer, JSON.stringify(extra)).toEqual(expected);
    }
  });

  it('an error answered form-encoded is the error it names: invalid_grant (400) and bad_refresh_token (200, as GitHub answers) refuse the grant, invalid_client the OAuth app', async () => {
    idp.mode.form = true;
    for (const refuse of [{ status: 400, error: 'invalid_grant' }, { status: 200, error: 'bad_refresh_token' }]) {
      idp.mode.refuse = refuse;
      const err = await refreshGrant(app(), 'rt_any', POLICY).then(() => null, (e: Error) => e);
      expect(err, JSON.stringify(refuse)).toBeInstanceOf(GrantRefused);
      expect(err, JSON.stringify(refuse)).not.toBeInstanceOf(ClientRefused);
      expect(err!.message).toBe(`the token endpoint answered ${refuse.status} ${refuse.error}`);
    }
    idp.mode.refuse = { status: 401, error: 'invalid_client' };
    expect(await refreshGrant(app(), 'rt_any', POLICY).then(() => null, (e: Error) => e)).toBeInstanceOf(ClientRefused);

    // Through the credential provider: the connection needs reauthorization, as for a JSON answer.
    idp.mode.refuse = null;
    const conn = await grantConnection();
    idp.live.delete(conn.refresh);
    const { deps } = testActivityDeps({ pool: db.pool });
    const err = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then(() => null, (e: Error) => e);
    expect(err?.name).toBe('CredentialsInvalid');
    expect(err?.message).toMatch(/the token endpoint answered 400 invalid_grant/);
    expect((await stored(conn.id)).status).toBe('needs_reauth');
  });

  it('every token request asks for JSON (Accept: application/json): a refresh, a client credentials request and a code exchange', async () => {
    const before = idp.accepts.length;
    for (const request of Object.values(tokenRequests(idp.url))) await request().catch(() => undefined);
    expect(idp.accepts.slice(before)).toEqual(['application/json', 'application/json', 'application/json']);
  });
});

describe('a token answer with a 2xx status other than 200 (201 Created)', () => {
  it('a refresh answered 201 or 202 with a token body returns its tokens', async () => {
    for (const status of [201, 202]) {
      idp.mode.tokenStatus = status;
      const seed = `rt_seed_${randomUUID()}`;
      idp.live.add(seed);
      const answer = await refreshGrant(app(), seed, POLICY).then((a) => a, (e: Error) => e);
      expect(answer, String(status)).toEqual({ ...idp.issued.at(-1)!, expires_in: 3600, scope: 'openid read' });
    }
  });

  it('through the credential provider the rotated refresh token answered 201 is stored, and the connect flow stores the grant answered 201', async () => {
    const conn = await grantConnection();
    idp.mode.tokenStatus = 201;
    await expectRefreshAndConnectStored(conn);
  });

  it('an error answered 201 is the error it names, and a 2xx without a token body stays refused', async () => {
    idp.mode.refuse = { status: 201, error: 'invalid_grant' };
    const err = await refreshGrant(app(), 'rt_any', POLICY).then(() => null, (e: Error) => e);
    expect(err).toBeInstanceOf(GrantRefused);
    expect(err!.message).toBe('the token endpoint answered 201 invalid_grant');
    idp.mode = { idToken: false, noTokenType: false, refuse: null, tokenStatus: 201, extra: { access_token: undefined } };
    const seed = `rt_seed_${randomUUID()}`;
    idp.live.add(seed);
    await expect(refreshGrant(app(), seed, POLICY)).rejects.toBeInstanceOf(TokenRequestFailed);
    // 204 No Content carries no body at all: refused for its status.
    idp.mode = { idToken: false, noTokenType: false, refuse: null, tokenStatus: 204 };
    const other = `rt_seed_${randomUUID()}`;
    idp.live.add(other);
    const empty = await refreshGrant(app(), other, POLICY).then(() => null, (e: Error) => e);
    expect(empty).toBeInstanceOf(TokenRequestFailed);
    expect(empty!.message).toBe('the token request failed: "response" is not a conform Token Endpoint response (unexpected HTTP status code)');
  });
});

describe('a token answer whose refresh_token is not a string (a number, an object, an array, a boolean)', () => {
  const cases = [
    { refresh_token: 4242424242, kind: 'a number' },
    { refresh_token: { value: 'rt_inner_0123456789' }, kind: 'an object' },
    { refresh_token: ['rt_inner_0123456789'], kind: 'an array' },
    { refresh_token: true, kind: 'a boolean' },
  ];
  const words = (kind: string) => `the token endpoint at '127.0.0.1' answered, but its refresh_token is ${kind}, not a string: the answer is refused`;

  it('a refresh is refused naming the member, what it is and the endpoint\'s host, quoting no token', async () => {
    for (const { refresh_token, kind } of cases) {
      idp.mode.extra = { refresh_token };
      const seed = `rt_seed_${randomUUID()}`;
      idp.live.add(seed);
      const err = await refreshGrant(app(), seed, POLICY).then(() => null, (e: Error) => e);
      expect(err, kind).toBeInstanceOf(TokenRequestFailed);
      expect(err!.message, kind).toBe(words(kind));
      for (const secret of [CLIENT_SECRET, seed, idp.issued.at(-1)!.access_token, 'rt_inner_0123456789', '4242424242']) expect(err!.message, kind).not.toContain(secret);
    }
  });

  it('through the credential provider the refresh fails (tried again) without refusing the connection or replacing its tokens; the connect flow is refused (502)', async () => {
    const conn = await grantConnection();
    idp.mode.extra = { refresh_token: 4242424242 };
    const { deps } = testActivityDeps({ pool: db.pool });
    const err = await credentialProvider(deps, conn.id, conn.sealed, conn.id).current().then(() => null, (e: Error) => e);
    expect(err?.name).toBe('Transient');
    expect(err!.message).toBe(`oauth2: refreshing the access token failed: ${words('a number')}`);
    expect(err!.message).not.toContain(idp.issued.at(-1)!.access_token);
    expect(await stored(conn.id)).toMatchObject({ status: 'active', secret: { refresh_token: conn.refresh } });

    const flow = await connectFlow().then(() => null, (e: Error) => e);
    expect(flow).toMatchObject({ reason: 'failed', code: 'token_exchange_failed', message: `the code exchange failed: ${words('a number')}` });
    expect(flow!.message).not.toContain(idp.issued.at(-1)!.access_token);
  });
});
