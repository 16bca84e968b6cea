// The API's calls to Temporal are bounded by API_TEMPORAL_TIMEOUT_SECONDS: against a Temporal
// frontend that accepts connections and HTTP/2 streams but never answers one, a route that calls
// Temporal after its database work answers 503 `unavailable` naming Temporal once the deadline
// passes, its database work committed, instead of never answering (and holding its tenant's turn at
// the pool meanwhile). A workflow start left to the background after the answer gets its own
// deadline, not the request's passed one: each of its attempts reaches the server.
// Against the real API app (over HTTP) and Postgres, with a real Temporal client and a silent HTTP/2 server.
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackgroundStarts } from '../lib/background-starts';
import { listen, type HttpServer } from '../lib/http';
import { apiAppWithoutTemporal, callApi, TEST_API_KEY, type ApiAnswer } from './helpers/api';
import { useTestDatabase } from './helpers/database';

/** How long the test waits for an answer: far longer than the API's own deadline (API_TEMPORAL_TIMEOUT_SECONDS) set below. */
const ANSWER_WITHIN_MS = 15_000;
const API_DEADLINE_MS = 1000;

/** The gRPC calls the silent server was sent, in order, each with whether its deadline had passed (none is ever answered). */
const asked: string[] = [];
const held: http2.ServerHttp2Stream[] = [];

describe('the API against a Temporal frontend that never answers (real API app, real Postgres)', () => {
  const db = useTestDatabase();
  let silent: http2.Http2Server;
  let connection: Connection;
  let server: HttpServer;
  const failed: string[] = [];
  const background = new BackgroundStarts((_err, what) => failed.push(what), 2, 1);
  let id: string;

  beforeAll(async () => {
    silent = http2.createServer();
    silent.on('stream', (stream, headers) => {
      // grpc-timeout: what is left of the call's deadline, e.g. `480m` (ms); `0m` when it had passed.
      const left = /^(\d+)[HMSmun]$/.exec(String(headers['grpc-timeout'] ?? ''))?.[1];
      asked.push(`${String(headers[':path']).split('/').pop()} ${left === undefined ? 'without a deadline' : Number(left) > 0 ? 'before its deadline' : 'past its deadline'}`);
      held.push(stream);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    connection = Connection.lazy({ address: `127.0.0.1:${(silent.address() as AddressInfo).port}` });
    const temporal = new Client({ connection });
    server = await listen(apiAppWithoutTemporal(db.pool, 'temporal-deadline', { temporal, background, temporalTimeoutMs: API_DEADLINE_MS }), '127.0.0.1', 0);
    // The connection the later routes act on, made through an app whose Temporal starts every workflow at once.
    const starting = { workflow: { start: async () => ({}) } } as unknown as Client;
    const made = await apiAppWithoutTemporal(db.pool, 'temporal-deadline', { temporal: starting }).request('/connections', {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tenant_id: 'silent', app_key: 'made-before', provider: 'demo', config: { resource_types: ['items'] }, schedule: { interval_seconds: 3600 } }),
    });
    id = ((await made.json()) as { id: string }).id;
  });

  afterAll(async () => {
    await server?.close(1000);
    await connection?.close();
    for (const stream of held) stream.close();
    await new Promise((resolve) => silent?.close(resolve));
  });

  /** The API's answer, or a rejection when none came within ANSWER_WITHIN_MS. */
  async function answer(method: string, path: string, body?: unknown): Promise<ApiAnswer> {
    let timer: NodeJS.Timeout | undefined;
    const none = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer to ${method} ${path} within ${ANSWER_WITHIN_MS} ms`)), ANSWER_WITHIN_MS)));
    try {
      return await Promise.race([callApi(server.url, TEST_API_KEY, method, path, body), none]);
    } finally {
      clearTimeout(timer);
    }
  }

  const unavailable = { status: 503, code: 'unavailable', message: 'Temporal is unreachable; try again shortly' };
  const outcome = (a: ApiAnswer) => ({ status: a.status, code: a.body?.error?.code, message: a.body?.error?.message });
  it('creates a connection (201), its workflow start tried in the request and then twice in the background, each attempt before a deadline of its own', async () => {
    const body = { tenant_id: 'silent', app_key: 'made-while-silent', provider: 'demo', config: { resource_types: ['items'] }, schedule: { interval_seconds: 3600 } };
    const created = await answer('POST', '/connections', body);
    expect([created.status, created.body.error ?? null]).toEqual([201, null]);
    await background.drain(ANSWER_WITHIN_MS);
    expect(failed).toEqual([`connection:${created.body.id}`]);
    // The first, in the request, ran out of the request's deadline; each attempt after the answer was sent with time left.
    const starts = asked.filter((call) => call.startsWith('StartWorkflowExecution '));
    expect(starts.slice(1)).toEqual(Array(2).fill('StartWorkflowExecution before its deadline'));
    expect(starts).toHaveLength(3);
  }, 2 * ANSWER_WITHIN_MS);

  it('answers a pause with 503 naming Temporal once the deadline passes; the pause is stored', async () => {
    expect(outcome(await answer('POST', `/connections/${id}/pause`))).toEqual(unavailable);
    const { rows } = await db.pool.query<{ status: string }>('select status from connections where id = $1', [id]);
    expect(rows.map((r) => r.status)).toEqual(['paused']);
  }, 2 * ANSWER_WITHIN_MS);

  it('answers a resume and a schedule change with 503 naming Temporal once the deadline passes', async () => {
    expect(outcome(await answer('POST', `/connections/${id}/resume`))).toEqual(unavailable);
    expect(outcome(await answer('PATCH', `/connections/${id}`, { schedule: { interval_seconds: 7200 } }))).toEqual(unavailable);
    const { rows } = await db.pool.query<{ status: string }>('select status from connections where id = $1', [id]);
    expect(rows.map((r) => r.status)).toEqual(['active']);
  }, 3 * ANSWER_WITHIN_MS);
});
