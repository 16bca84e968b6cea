// A client credentials credential's `token_url` is a URL Synctide itself requests (with the client
// secret): the API holds it to the deployment's provider rules (a host of PROVIDER_HOSTS, https;
// a private literal only with PROVIDER_ALLOW_PRIVATE) when the credential is given, 400 naming the
// key, as it holds a connection's base_url and an OAuth app's token_url; not only when a sync
// first asks for a token. Against real Postgres.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createConnection, updateConnection } from '../commands/connections';
import type { CommandDeps } from '../commands/deps';
import { DEFAULT_PROVIDER_POLICY } from '../connectors/provider-http';
import { useTestDatabase } from './helpers/database';
import { TEST_KEYRING } from './helpers/deps';

const db = useTestDatabase();

const config = { base_url: 'https://api.github.com', auth: { type: 'bearer' }, resources: { items: { path: '/items', id: 'id' } } };
const credential = (token_url: string) => ({ kind: 'oauth2_client_credentials', token_url, client_id: 'client-1', client_secret: 'client-secret-0123456789' });

describe("a client credentials credential's token_url", () => {
  it('is refused when given (create and PATCH) outside PROVIDER_HOSTS, over plain http, or at an internal address, naming the key and echoing no secret', async () => {
    const deps = { pool: db.pool, credentials: TEST_KEYRING, providers: DEFAULT_PROVIDER_POLICY, maxIntervalSeconds: 86_400 } as unknown as CommandDeps;
    const id = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', $2, $3)`, [id, `cc-${id.slice(0, 8)}`, config]);
    for (const url of ['https://169.254.169.254/latest/api/token', 'https://127.0.0.1/token', 'https://evil.example/token', 'http://api.github.com/token']) {
      const patched = await updateConnection(deps, id, { credentials: credential(url) }).then(() => 'stored', (e: Error) => e.message);
      expect(patched, url).toMatch(/^credentials\.token_url: /);
      expect(patched, url).not.toContain('client-secret-0123456789');
      const created = await createConnection(deps, { tenantId: 'acme', provider: 'http', appKey: `cc-new-${randomUUID().slice(0, 8)}`, config, credentials: credential(url) } as never).then(
        () => 'stored',
        (e: Error) => e.message,
      );
      expect(created, url).toMatch(/^credentials\.token_url: /);
    }
    // A host of PROVIDER_HOSTS over https is taken.
    const row = await updateConnection(deps, id, { credentials: credential('https://github.com/login/oauth/access_token') });
    expect(row.has_credentials).toBe(true);
  });
});
