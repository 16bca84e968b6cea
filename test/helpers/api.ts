import type { Client } from '@temporalio/client';
import { beforeAll } from 'vitest';
import { Registry } from 'prom-client';
import { createApp } from '../../api/app';
import type { ApiDeps } from '../../api/deps';
import { listen, type HttpServer } from '../../lib/http';
import { createSyncMetrics } from '../../lib/metrics';
import type { Pool } from '../../db/pool';
import { useTestDatabase, type TestDatabase } from './database';
import { TEST_KEYRING, TEST_PROVIDER_POLICY } from './deps';
import { capturingLogger, type LogLines } from './logs';
import type { WorkerStack } from './stack';

/** The admin key of test APIs. */
export const TEST_API_KEY = 'test-admin-key-0123456789abcdef';

/** An answer of the API: its status, its body parsed as JSON (the text when it is not JSON), and the text. */
export interface ApiAnswer {
  status: number;
  body: any;
  text: string;
}

/**
 * One call of the API at `url` with `key` as the bearer token (none: null) and `body`, if any, as
 * JSON. A redirect is answered as it is (the connect flow's), not followed.
 */
export async function callApi(url: string, key: string | null, method: string, path: string, body?: unknown): Promise<ApiAnswer> {
  const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), redirect: 'manual' });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, body: parsed, text };
}

/** An API in front of a worker stack, listening on 127.0.0.1, with a caller that sends the admin key. */
export interface TestApi {
  server: HttpServer;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
}

/** Starts the real API on `stack`'s database and Temporal server; `overrides` replace its settings. */
export async function startTestApi(stack: WorkerStack, taskQueue: string, overrides: Partial<ApiDeps> = {}): Promise<TestApi> {
  const app = createApp(testApiDeps({ pool: stack.db.pool, temporal: stack.env.client, registry: stack.registry, metrics: stack.metrics, taskQueue }, overrides));
  const server = await listen(app, '127.0.0.1', 0);
  return {
    server,
    async call(method, path, body) {
      const answer = await callApi(server.url, TEST_API_KEY, method, path, body);
      return { status: answer.status, body: answer.text === '' ? null : answer.body };
    },
  };
}

/**
 * The real API app on `pool` with no Temporal behind it, called in-process (`app.request`): for
 * tests whose requests are all answered (or refused) before any would reach Temporal.
 */
export function apiAppWithoutTemporal(pool: Pool, taskQueue: string, overrides: Partial<ApiDeps> = {}): ReturnType<typeof createApp> {
  const registry = new Registry();
  return createApp(testApiDeps({ pool, temporal: undefined as unknown as Client, registry, metrics: createSyncMetrics(registry), taskQueue }, overrides));
}

/**
 * The real API app on `pool` in front of the Temporal server `temporal` is a client of (no worker
 * needed: workflows it starts wait), called in-process (`app.request`): for tests whose requests
 * may reach Temporal.
 */
export function apiAppOnTemporal(pool: Pool, temporal: Client, taskQueue: string, overrides: Partial<ApiDeps> = {}): ReturnType<typeof createApp> {
  return apiAppWithoutTemporal(pool, taskQueue, { temporal, ...overrides });
}

/**
 * The real API app on `pool` with no Temporal behind it (apiAppWithoutTemporal), listening on
 * 127.0.0.1, and the lines its logger wrote, parsed: for tests that call it over HTTP.
 */
export async function listenWithoutTemporal(pool: Pool, taskQueue: string): Promise<{ server: HttpServer; lines: LogLines }> {
  const { logger, lines } = capturingLogger();
  const server = await listen(apiAppWithoutTemporal(pool, taskQueue, { logger }), '127.0.0.1', 0);
  return { server, lines };
}

/** The real API app with no Temporal behind it, on a database of its own, and a caller that sends the admin key. */
export interface ApiWithoutTemporal {
  db: TestDatabase;
  app: ReturnType<typeof createApp>;
  /** One request of the app with the admin key (`body`, if any, as JSON): its status and its body parsed as JSON. */
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
}

/**
 * Registers beforeAll/afterAll hooks that give the calling file (or describe block) a fresh,
 * migrated database and the real API app on it with no Temporal behind it (apiAppWithoutTemporal
 * with `overrides`), the database dropped after the caller's own afterAll hooks; the returned
 * object is filled in by the time the caller's own beforeAll hooks run.
 */
export function useApiWithoutTemporal(taskQueue: string, overrides: Partial<ApiDeps> = {}): ApiWithoutTemporal {
  const api = { db: useTestDatabase() } as ApiWithoutTemporal;
  beforeAll(() => {
    api.app = apiAppWithoutTemporal(api.db.pool, taskQueue, overrides);
  });
  api.call = async (method, path, body) => {
    const headers: Record<string, string> = { authorization: `Bearer ${TEST_API_KEY}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await api.app.request(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: await res.json() };
  };
  return api;
}

/** The API's settings in tests (admin key, test keyring and provider policy), around what each test wires; `overrides` replace any. */
function testApiDeps(wired: Pick<ApiDeps, 'pool' | 'temporal' | 'registry' | 'metrics' | 'taskQueue'>, overrides: Partial<ApiDeps>): ApiDeps {
  return {
    ...wired,
    logger: capturingLogger().logger,
    adminApiKey: TEST_API_KEY,
    credentials: TEST_KEYRING,
    maxIntervalSeconds: 86_400,
    immediateSyncTimeoutMs: 60_000,
    providers: TEST_PROVIDER_POLICY,
    ...overrides,
  };
}
