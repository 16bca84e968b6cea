// A connection created while Temporal cannot be reached exists once its row is committed: the
// answer is 201 with it, and its workflow is started after the answer (then by the reconcile tick),
// never a 503 for a connection the database holds, whose retry then meets 409 on its own app_key.
// Against the real API app and Postgres, with a Temporal client whose every start fails as an
// unreachable server's does.
import type { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { BackgroundStarts } from '../lib/background-starts';
import { useApiWithoutTemporal } from './helpers/api';

const unreachable = Object.assign(new Error('14 UNAVAILABLE: No connection established'), { name: 'ServiceError', cause: { code: 14 } });
const starts: string[] = [];
const failed: string[] = [];
const temporal = {
  workflow: {
    start: async (_type: unknown, options: { workflowId: string }) => {
      starts.push(options.workflowId);
      throw unreachable;
    },
  },
} as unknown as Client;

describe('a connection created while Temporal is unreachable (real API app, real Postgres)', () => {
  const background = new BackgroundStarts((_err, what) => failed.push(what), 2, 1);
  const api = useApiWithoutTemporal('create-temporal-down', { temporal, background });

  it('is answered 201 with the stored connection, its workflow start left to the background and the reconcile tick', async () => {
    const body = { tenant_id: 'down', app_key: 'made-while-down', provider: 'demo', config: { resource_types: ['items'] }, schedule: { interval_seconds: 3600 } };
    const first = await api.call('POST', '/connections', body);
    expect([first.status, first.body.error?.code ?? null]).toEqual([201, null]);
    const { rows } = await api.db.pool.query<{ id: string }>(`select id from connections where tenant_id = 'down' and app_key = 'made-while-down'`);
    expect(rows.map((r) => r.id)).toEqual([first.body.id]);
    await background.drain();
    // Tried in the request, then twice in the background, each failing; the reconcile tick adopts it.
    expect(starts).toEqual(Array(3).fill(`connection:${first.body.id}`));
    expect(failed).toEqual([`connection:${first.body.id}`]);
  });
});
