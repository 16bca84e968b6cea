// Which scopes an OAuth 2 grant records, against a real OAuth server on 127.0.0.1
// (test/helpers/fake-oauth.ts) and real Postgres: a code exchange answered without `scope` records
// the scopes the connect flow asked for (RFC 6749 §5.1: the scope granted is then the one
// requested), the app's or those the flow named (a flow started before they were kept with it: its
// app's); a refresh answered without `scope` keeps the scopes stored (RFC 6749 §6: the scope stays
// as granted); a scope is read spaced (RFC 6749) or comma-separated (GitHub), empty entries and
// repeats left out; an answer whose scope names none ("") granted none.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { credentialProvider } from '../activities/credential-provider';
import type { CommandDeps } from '../commands/deps';
import { completeAuthorization, startAuthorization } from '../commands/oauth';
import { open, seal, sealCredentials } from '../lib/credentials';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { TEST_KEYRING, TEST_PROVIDER_POLICY, testActivityDeps } from './helpers/deps';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';
import { insertOAuthApp, insertOAuthConnection, storedCredentials } from './helpers/oauth-grants';

let db: TestDatabase;
let oauth: FakeOAuth;
beforeAll(async () => {
  db = await createTestDatabase();
  oauth = await startFakeOAuth();
});
afterAll(async () => {
  await oauth?.close();
  await db?.drop();
});
beforeEach(() => {
  oauth.answerScope = 'read';
});

const commandDeps = () => ({ pool: db.pool, credentials: TEST_KEYRING, providers: TEST_PROVIDER_POLICY, maxIntervalSeconds: 86_400 }) as unknown as CommandDeps;
const config = () => ({ base_url: oauth.url, auth: { type: 'bearer' }, resources: {} });

/** A new OAuth app of tenant acme at the fake server asking for `scopes`; its id. */
async function insertApp(scopes: string[]): Promise<string> {
  const id = randomUUID();
  await insertOAuthApp(db.pool, { id, tenantId: 'acme', name: `app-${id.slice(0, 8)}`, clientId: oauth.clientId, clientSecret: oauth.clientSecret, origin: oauth.url });
  await db.pool.query('update oauth_apps set scopes = $2 where id = $1', [id, scopes]);
  return id;
}

/** A connection waiting for a grant. */
async function newConnection(): Promise<string> {
  const id = randomUUID();
  await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config, status) values ($1, 'acme', 'http', $2, $3, 'needs_reauth')`, [id, `s-${id.slice(0, 8)}`, config()]);
  return id;
}

/** The connect flow of `connectionId` with app `appId` (asking for `scopes` when given), through the fake's consent; the scope the authorization URL asked for. */
async function connect(connectionId: string, appId: string, scopes?: string[]): Promise<string | null> {
  const start = await startAuthorization(commandDeps(), connectionId, { appId, ...(scopes && { scopes }) });
  const consent = await fetch(start.authorization_url, { redirect: 'manual' });
  const back = new URL(consent.headers.get('location')!);
  const done = await completeAuthorization(commandDeps(), { state: back.searchParams.get('state')!, code: back.searchParams.get('code')! });
  expect(done).toEqual({ connection_id: connectionId, status: 'active' });
  return new URL(start.authorization_url).searchParams.get('scope');
}

/** The oauth2 secret connection `connectionId` uses, opened, and what a credential provider needs. */
async function stored(connectionId: string) {
  const row = (await storedCredentials(db.pool, connectionId))!;
  const secret = JSON.parse(open(TEST_KEYRING, { table: 'connections', id: row.boundTo }, row.credentials as string)) as Record<string, unknown>;
  return { secret, sealed: row.credentials, grantId: row.boundTo };
}

/** Refreshes the grant of `connectionId` through the credential provider, as a run does when the provider refuses its access token (401). */
async function refresh(connectionId: string): Promise<void> {
  const { sealed, grantId } = await stored(connectionId);
  const before = oauth.counts.refresh;
  const { deps } = testActivityDeps({ pool: db.pool });
  const provider = credentialProvider(deps, connectionId, sealed, grantId);
  await provider.renewed(await provider.current());
  expect(oauth.counts.refresh - before).toBe(1);
}

describe('a token answer without scope', () => {
  it("a code exchange answered without scope records the scopes the flow asked for: the app's, or those the authorize request named", async () => {
    oauth.answerScope = null;
    const appId = await insertApp(['repo', 'read:org']);
    const byApp = await newConnection();
    expect(await connect(byApp, appId)).toBe('repo read:org');
    expect((await stored(byApp)).secret.scopes).toEqual(['repo', 'read:org']);

    const named = await newConnection();
    expect(await connect(named, appId, ['user:email'])).toBe('user:email');
    expect((await stored(named)).secret.scopes).toEqual(['user:email']);
  });

  it("a flow started before the scopes were kept with its verifier (the bare verifier sealed), answered without scope, records its app's scopes", async () => {
    oauth.answerScope = null;
    const appId = await insertApp(['repo']);
    const id = await newConnection();
    const start = await startAuthorization(commandDeps(), id, { appId });
    const { rows } = await db.pool.query<{ state_hash: string; code_verifier: string }>('select state_hash, code_verifier from oauth_states where connection_id = $1', [id]);
    const slot = { table: 'oauth_states', id: rows[0]!.state_hash } as const;
    const { verifier } = JSON.parse(open(TEST_KEYRING, slot, rows[0]!.code_verifier)) as { verifier: string };
    await db.pool.query('update oauth_states set code_verifier = $2 where state_hash = $1', [rows[0]!.state_hash, seal(TEST_KEYRING, slot, verifier)]);
    const back = new URL((await fetch(start.authorization_url, { redirect: 'manual' })).headers.get('location')!);
    expect(await completeAuthorization(commandDeps(), { state: back.searchParams.get('state')!, code: back.searchParams.get('code')! })).toEqual({ connection_id: id, status: 'active' });
    expect((await stored(id)).secret.scopes).toEqual(['repo']);
  });

  it('a connect flow replacing a grant answered without scope records the scopes asked for now, not those of the grant it replaces', async () => {
    const appId = await insertApp(['read']);
    const id = await newConnection();
    oauth.answerScope = 'read write';
    await connect(id, appId);
    expect((await stored(id)).secret.scopes).toEqual(['read', 'write']);
    oauth.answerScope = null;
    await connect(id, appId, ['read']);
    expect((await stored(id)).secret.scopes).toEqual(['read']);
  });

  it('a refresh answered without scope keeps the scopes stored: of a grant stored with them, and of one the connect flow made from an answer without scope', async () => {
    oauth.answerScope = null;
    const appId = await insertApp(['repo']);
    const held = randomUUID();
    const grant = oauth.grant();
    const secret = { kind: 'oauth2', access_token: grant.access, refresh_token: grant.refresh, expires_at: new Date(Date.now() + 3_600_000).toISOString(), scopes: ['repo', 'user'] };
    await insertOAuthConnection(db.pool, { id: held, tenantId: 'acme', appKey: `h-${held.slice(0, 8)}`, config: config(), appId, sealed: sealCredentials(TEST_KEYRING, held, secret)! });
    await refresh(held);
    expect((await stored(held)).secret).toMatchObject({ access_token: oauth.issued.at(-2), scopes: ['repo', 'user'] });

    const flowed = await newConnection();
    await connect(flowed, appId);
    await refresh(flowed);
    expect((await stored(flowed)).secret).toMatchObject({ access_token: oauth.issued.at(-2), scopes: ['repo'] });
  });
});

describe("a token answer's scope, spaced as RFC 6749 spells it or comma-separated as GitHub answers it", () => {
  const spellings = ['repo user', 'repo,user', 'repo, user', ' repo  user ', 'repo,,user,', 'repo,user repo'];

  it('a code exchange records each scope named, whichever the separator, without empty entries', async () => {
    const appId = await insertApp(['repo', 'user']);
    for (const spelling of spellings) {
      oauth.answerScope = spelling;
      const id = await newConnection();
      await connect(id, appId);
      expect((await stored(id)).secret.scopes, JSON.stringify(spelling)).toEqual(['repo', 'user']);
    }
  });

  it('a refresh records each scope named, whichever the separator, without empty entries', async () => {
    const appId = await insertApp(['repo', 'user']);
    const id = randomUUID();
    const grant = oauth.grant();
    const secret = { kind: 'oauth2', access_token: grant.access, refresh_token: grant.refresh, expires_at: new Date(Date.now() + 3_600_000).toISOString(), scopes: ['read'] };
    await insertOAuthConnection(db.pool, { id, tenantId: 'acme', appKey: `r-${id.slice(0, 8)}`, config: config(), appId, sealed: sealCredentials(TEST_KEYRING, id, secret)! });
    for (const spelling of spellings) {
      oauth.answerScope = spelling;
      await refresh(id);
      expect((await stored(id)).secret, JSON.stringify(spelling)).toMatchObject({ access_token: oauth.issued.at(-2), scopes: ['repo', 'user'] });
    }
  });

  it("the scopes asked for, recorded from an answer without scope, are read the same way: an app's comma-separated 'repo,user', and a grant stored as one entry before a refresh answered without scope", async () => {
    oauth.answerScope = null;
    const appId = await insertApp(['repo,user', 'repo']);
    const flowed = await newConnection();
    expect(await connect(flowed, appId)).toBe('repo,user repo');
    expect((await stored(flowed)).secret.scopes).toEqual(['repo', 'user']);

    const held = randomUUID();
    const grant = oauth.grant();
    const secret = { kind: 'oauth2', access_token: grant.access, refresh_token: grant.refresh, expires_at: new Date(Date.now() + 3_600_000).toISOString(), scopes: ['repo,user'] };
    await insertOAuthConnection(db.pool, { id: held, tenantId: 'acme', appKey: `o-${held.slice(0, 8)}`, config: config(), appId, sealed: sealCredentials(TEST_KEYRING, held, secret)! });
    await refresh(held);
    expect((await stored(held)).secret).toMatchObject({ access_token: oauth.issued.at(-2), scopes: ['repo', 'user'] });
  });
});

describe('a token answer whose scope is empty (as GitHub answers a GitHub App\'s user token: `scope=`)', () => {
  it('a code exchange answered with scope "" records no scopes, not those asked for: the answer names the scope granted, and it is none', async () => {
    oauth.answerScope = '';
    const appId = await insertApp(['repo']);
    const id = await newConnection();
    expect(await connect(id, appId)).toBe('repo');
    expect((await stored(id)).secret.scopes).toEqual([]);
  });

  it('a refresh answered with scope "" (or separators alone) records no scopes, not those held before', async () => {
    const appId = await insertApp(['repo']);
    for (const spelling of ['', ' , ']) {
      const id = randomUUID();
      const grant = oauth.grant();
      const secret = { kind: 'oauth2', access_token: grant.access, refresh_token: grant.refresh, expires_at: new Date(Date.now() + 3_600_000).toISOString(), scopes: ['repo'] };
      await insertOAuthConnection(db.pool, { id, tenantId: 'acme', appKey: `e-${id.slice(0, 8)}`, config: config(), appId, sealed: sealCredentials(TEST_KEYRING, id, secret)! });
      oauth.answerScope = spelling;
      await refresh(id);
      expect((await stored(id)).secret, JSON.stringify(spelling)).toMatchObject({ access_token: oauth.issued.at(-2), scopes: [] });
    }
  });
});
