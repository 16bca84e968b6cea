// A UUID the API is given in capitals (Swift's `uuidString`, .NET's `ToUpper()`) names what the
// stored, lower-case id names: in a path, a query and a body alike. Against the real API app and
// Postgres; Temporal is a stub none of these requests reach.
import { describe, expect, it } from 'vitest';
import { openCredentials } from '../lib/credentials';
import { TEST_KEYRING } from './helpers/deps';
import { useApiWithoutTemporal } from './helpers/api';

describe('ids in capitals (real API app, real Postgres)', () => {
  const api = useApiWithoutTemporal('id-case');

  const connection = async (appKey: string, status: string) => {
    const { rows } = await api.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status, config) values ('id-case', 'github', $1, $2, $3) returning id`,
      [appKey, status, { repositories: ['octo/a'], resource_types: ['issues'] }],
    );
    return rows[0]!.id;
  };

  it("POST /jobs/schedule: a connectorId in capitals is the connection's own id, as pairId in lower case is", async () => {
    const id = await connection('backfill', 'paused');
    const window = { start: '2025-01-01T00:00:00Z', end: '2025-01-02T00:00:00Z' };
    const answers = [
      await api.call('POST', '/jobs/schedule', { pairId: id, connectorId: id.toUpperCase(), window }),
      await api.call('POST', '/jobs/schedule', { pairId: id.toUpperCase(), connectorId: id, window }),
    ];
    // The connection is paused: refused as such, not as naming another connector.
    expect(answers.map((a) => [a.status, a.body.error?.code])).toEqual([
      [409, 'connection_paused'],
      [409, 'connection_paused'],
    ]);
  });

  it('PATCH /connections/{ID}: credentials given so are sealed to the stored row, and the workers open them', async () => {
    const id = await connection('creds', 'active');
    const token = 'ghp_capitals_token_0123456789';
    const res = await api.call('PATCH', `/connections/${id.toUpperCase()}`, { credentials: { token } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.id).toBe(id);
    const { rows } = await api.db.pool.query<{ credentials: unknown }>('select credentials from connections where id = $1', [id]);
    const opened = (() => {
      try {
        return openCredentials(TEST_KEYRING, id, rows[0]!.credentials);
      } catch (err) {
        return String(err);
      }
    })();
    expect(opened).toEqual({ token });
  });
});
