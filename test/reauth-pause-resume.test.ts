// A pause or resume of a connection that needs reauthorization (the provider refused its
// credentials) keeps it `needs_reauth`: only new credentials end that. What the request asked for
// is kept as the status the connection gets back when they come (`status_before_reauth`): a
// resume makes it `active` then, a pause `paused`. The answer names the status the connection has.
// The same holds for a pause or resume a workflow stores from a signal (the `temporal` CLI's).
// Through the real API (its Temporal a stand-in that takes every signal) on real Postgres.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { setConnectionStatus } from '../activities/connection-settings';
import { useApiWithoutTemporal } from './helpers/api';
import { testActivityDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';

const temporal = fakeTemporal();
const api = useApiWithoutTemporal('reauth-pause-resume', { temporal: temporal.client });
const TENANT = 'acme-reauth-requests';
const config = { base_url: 'http://127.0.0.1:9', auth: { type: 'bearer' }, resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } } };

/** An http connection in status `status`; marked `needs_reauth` (as a refusal marks it) when `refusedWhile` is given. */
async function connection(status: 'active' | 'paused' | 'disabled', refusedWhile?: 'active' | 'paused'): Promise<string> {
  const id = randomUUID();
  await api.db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config, status) values ($1, $2, 'http', $3, $4, $5)`, [
    id, TENANT, `c-${id.slice(0, 8)}`, config, refusedWhile ?? status,
  ]);
  if (refusedWhile) await api.db.pool.query(`update connections set status = 'needs_reauth', status_before_reauth = status where id = $1`, [id]);
  return id;
}

const stateOf = async (id: string) =>
  (await api.db.pool.query<{ status: string; status_before_reauth: string | null }>('select status, status_before_reauth from connections where id = $1', [id])).rows[0];

/** New credentials for connection `id` (a token PATCH), which end `needs_reauth`. */
async function renewCredentials(id: string): Promise<void> {
  const patched = await api.call('PATCH', `/connections/${id}`, { credentials: { token: `tok_${randomUUID()}` } });
  expect(patched.status, JSON.stringify(patched.body)).toBe(200);
}

describe('POST /connections/:id/resume of a connection that needs reauthorization', () => {
  it('keeps it needs_reauth, answers so, and makes it active once new credentials come', async () => {
    const id = await connection('paused', 'paused');
    const resumed = await api.call('POST', `/connections/${id}/resume`);
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect(resumed.body).toMatchObject({ id, status: 'needs_reauth' });
    expect(await stateOf(id)).toEqual({ status: 'needs_reauth', status_before_reauth: 'active' });
    await renewCredentials(id);
    expect(await stateOf(id)).toEqual({ status: 'active', status_before_reauth: null });
  });
});

describe('POST /connections/:id/pause of a connection that needs reauthorization', () => {
  it('keeps it needs_reauth, answers so, and leaves it paused once new credentials come', async () => {
    const id = await connection('active', 'active');
    const paused = await api.call('POST', `/connections/${id}/pause`);
    expect(paused.status, JSON.stringify(paused.body)).toBe(200);
    expect(paused.body).toMatchObject({ id, status: 'needs_reauth' });
    expect(await stateOf(id)).toEqual({ status: 'needs_reauth', status_before_reauth: 'paused' });
    await renewCredentials(id);
    expect(await stateOf(id)).toEqual({ status: 'paused', status_before_reauth: null });
  });

  it('then a resume: the last request decides the status it gets back', async () => {
    const id = await connection('active', 'active');
    expect((await api.call('POST', `/connections/${id}/pause`)).body).toMatchObject({ status: 'needs_reauth' });
    expect((await api.call('POST', `/connections/${id}/resume`)).body).toMatchObject({ status: 'needs_reauth' });
    expect(await stateOf(id)).toEqual({ status: 'needs_reauth', status_before_reauth: 'active' });
  });
});

describe('a pause or resume a connection workflow stores from a signal', () => {
  it('keeps a connection that needs reauthorization needs_reauth, keeping the status asked for', async () => {
    const { deps } = testActivityDeps({ pool: api.db.pool });
    const id = await connection('paused', 'paused');
    expect(await setConnectionStatus(deps)({ connectionId: id, status: 'active' })).toBe('needs_reauth');
    expect(await stateOf(id)).toEqual({ status: 'needs_reauth', status_before_reauth: 'active' });
    expect(await setConnectionStatus(deps)({ connectionId: id, status: 'paused' })).toBe('needs_reauth');
    expect(await stateOf(id)).toEqual({ status: 'needs_reauth', status_before_reauth: 'paused' });
  });
});

describe('a pause or resume of a connection that does not need reauthorization', () => {
  it('writes the status asked for and answers it', async () => {
    const id = await connection('active');
    expect((await api.call('POST', `/connections/${id}/pause`)).body).toMatchObject({ id, status: 'paused' });
    expect(await stateOf(id)).toEqual({ status: 'paused', status_before_reauth: null });
    expect((await api.call('POST', `/connections/${id}/resume`)).body).toMatchObject({ id, status: 'active' });
    expect(await stateOf(id)).toEqual({ status: 'active', status_before_reauth: null });
    const disabled = await connection('disabled');
    expect((await api.call('POST', `/connections/${disabled}/resume`)).body).toMatchObject({ id: disabled, status: 'active' });
    expect(await stateOf(disabled)).toEqual({ status: 'active', status_before_reauth: null });
  });
});

describe('POST /connections/:id/disable of a connection that needs reauthorization, then a resume', () => {
  it('comes back needs_reauth (its refused credentials are not used again), and active once new credentials come', async () => {
    const id = await connection('active', 'paused');
    const disabled = await api.call('POST', `/connections/${id}/disable`);
    expect(disabled.status, JSON.stringify(disabled.body)).toBe(200);
    expect(disabled.body).toMatchObject({ id, status: 'disabled' });
    // The refusal is kept beside the disable: what a resume reads.
    expect(await stateOf(id)).toEqual({ status: 'disabled', status_before_reauth: 'paused' });

    const resumed = await api.call('POST', `/connections/${id}/resume`);
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect(resumed.body).toMatchObject({ id, status: 'needs_reauth' });
    expect(await stateOf(id)).toEqual({ status: 'needs_reauth', status_before_reauth: 'active' });
    await renewCredentials(id);
    expect(await stateOf(id)).toEqual({ status: 'active', status_before_reauth: null });
  });

  it('one marked before the status it came from was kept (no status_before_reauth) comes back needs_reauth too', async () => {
    const id = await connection('active', 'active');
    await api.db.pool.query('update connections set status_before_reauth = null where id = $1', [id]);
    expect((await api.call('POST', `/connections/${id}/disable`)).body).toMatchObject({ status: 'disabled' });
    expect((await api.call('POST', `/connections/${id}/resume`)).body).toMatchObject({ status: 'needs_reauth' });
    expect(await stateOf(id)).toEqual({ status: 'needs_reauth', status_before_reauth: 'active' });
  });

  it('given new credentials while disabled, a resume makes it active', async () => {
    const id = await connection('active', 'active');
    expect((await api.call('POST', `/connections/${id}/disable`)).body).toMatchObject({ status: 'disabled' });
    await renewCredentials(id);
    expect(await stateOf(id)).toEqual({ status: 'disabled', status_before_reauth: null });
    expect((await api.call('POST', `/connections/${id}/resume`)).body).toMatchObject({ id, status: 'active' });
  });

  it('a disabled connection that did not need reauthorization resumes active, and its answer keeps no status', async () => {
    const id = await connection('active');
    expect((await api.call('POST', `/connections/${id}/disable`)).body).toMatchObject({ status: 'disabled' });
    expect(await stateOf(id)).toEqual({ status: 'disabled', status_before_reauth: null });
    expect((await api.call('POST', `/connections/${id}/resume`)).body).toMatchObject({ id, status: 'active' });
  });
});

describe('a connection that needs reauthorization, as the API answers it', () => {
  it('names the status new credentials give back (status_before_reauth), also once disabled, in the connection and in the listing; null for any other', async () => {
    const id = await connection('paused', 'paused');
    expect((await api.call('GET', `/connections/${id}`)).body).toMatchObject({ id, status: 'needs_reauth', status_before_reauth: 'paused' });
    expect((await api.call('POST', `/connections/${id}/disable`)).body).toMatchObject({ status: 'disabled' });
    // Disabled meanwhile: the refusal it keeps, which a resume brings back.
    expect((await api.call('GET', `/connections/${id}`)).body).toMatchObject({ id, status: 'disabled', status_before_reauth: 'paused' });
    const other = await connection('active');
    expect((await api.call('GET', `/connections/${other}`)).body).toMatchObject({ id: other, status: 'active', status_before_reauth: null });
    const listed = await api.call('GET', `/connections?tenant_id=${TENANT}&status=disabled&limit=100`);
    expect(listed.status, JSON.stringify(listed.body)).toBe(200);
    expect((listed.body as { items: { id: string }[] }).items.find((c) => c.id === id)).toMatchObject({ status: 'disabled', status_before_reauth: 'paused' });
  });
});
