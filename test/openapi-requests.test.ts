// Requests generated from the served /openapi.json: the API accepts what its document describes.
// json-schema-faker (seeded, so a failure replays) generates bodies from each route's request
// schema; they are sent to a real API in front of the Temporal dev server, a worker and Postgres.
// No answer may be a 500, every status must be one the route documents, and no generated body may
// be refused with 400 `invalid_request`.
//
// A few rules the document states in words only, because JSON Schema cannot say them or they
// depend on data; the generated values are adjusted to respect them, so that what remains tested
// is the schema itself:
// - which connection a request names (`app_key`, `tenant_id`, `pairId`, the path id, `connectorId`)
//   must exist: they name this file's connections (an unknown one is a 404); each backfill gets a
//   connection of its own (one backfill may be active per connection: a second is a 409);
// - `resource_types` (also `payload.resource_types` of a backfill) must be resource types of that
//   connection: generated names are mapped onto its own;
// - a backfill window's start must be before its end: the two are put in order;
// - `schedule.cron` must be a valid 5-field cron expression and `schedule.interval_seconds` at
//   most the deployment's MAX_OVERRIDDEN_INTERVAL_SECONDS: a fixed expression, a clamped interval;
//   `schedule.timezone` must be a zone the runtime knows and goes with a cron only, and
//   `schedule.full_sync_every` a run count or a duration such as "7d": fixed values;
// - a demo config's `world` names a dataset registered in-process by a test: dropped;
// - a GitHub `base_url` must be a URL Node's URL parser accepts: this file's fake GitHub server
//   (an http connection's too), and an http connection's header names must be tokens: dropped.
// New connections are created `paused` (a schema-valid demo config may ask for ten million records
// at 2^31 ms a page; a paused connection's workflow fetches nothing) and their app_keys are made
// unique (a taken one is a documented 409, not what this probes).
import { createGeneratorSync } from 'json-schema-faker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../api/app';
import { listen, type HttpServer } from '../lib/http';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { TEST_KEYRING, TEST_PROVIDER_POLICY } from './helpers/deps';
import { capturingLogger } from './helpers/logs';
import { useWorkerStack } from './helpers/stack';

const TASK_QUEUE = 'openapi-requests';
const KEY = 'test-admin-key-0123456789abcdef';
const MAX_INTERVAL_SECONDS = 86_400;
/** Bodies generated per route. */
const PER_ROUTE = 40;

type Json = Record<string, any>;

describe('requests generated from /openapi.json', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  const apiLog = capturingLogger();
  let server: HttpServer;
  let github: FakeGitHub;
  let doc: Json;
  let target: { id: string; appKey: string; tenantId: string; resourceTypes: string[] };

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const headers: Record<string, string> = { authorization: `Bearer ${KEY}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${server.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: res.status, body: parsed };
  }

  beforeAll(async () => {
    const app = createApp({
      pool: stack.db.pool,
      temporal: stack.env.client,
      registry: stack.registry,
      metrics: stack.metrics,
      logger: apiLog.logger,
      taskQueue: TASK_QUEUE,
      adminApiKey: KEY,
      credentials: TEST_KEYRING,
      maxIntervalSeconds: MAX_INTERVAL_SECONDS,
      immediateSyncTimeoutMs: 60_000,
      providers: TEST_PROVIDER_POLICY,
    });
    server = await listen(app, '127.0.0.1', 0);
    github = await startFakeGitHub({ token: 'ghp_unused_0123456789', repos: {} });
    doc = (await call('GET', '/openapi.json')).body;
    const created = await call('POST', '/connections', {
      tenant_id: 'acme', app_key: 'target', provider: 'demo',
      config: { records_per_resource: 5, page_size: 5 }, schedule: { interval_seconds: 3600 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    target = { id: created.body.id, appKey: 'target', tenantId: 'acme', resourceTypes: ['issues', 'pull_requests', 'users'] };
  });
  afterAll(async () => {
    await server?.close();
    await github?.close();
  });

  /** The operation object of `method path` in the served document. */
  const operation = (method: string, path: string): Json => doc.paths[path][method.toLowerCase()];

  /** `count` bodies generated from the request schema of `method path`, with the document's components. */
  function generate(method: string, path: string, count: number, seed: number): Json[] {
    const schema = operation(method, path).requestBody.content['application/json'].schema;
    const generator = createGeneratorSync({ seed });
    return Array.from({ length: count }, () => generator.generate({ ...schema, components: doc.components }) as Json);
  }

  /** Generated resource type names, each mapped onto one of the target connection's. */
  const ownTypes = (names: unknown) =>
    Array.isArray(names) ? names.map((_, i) => target.resourceTypes[i % target.resourceTypes.length]!) : names;

  function adjustSchedule(schedule: Json | undefined) {
    if (!schedule) return;
    // Exactly one of interval_seconds and cron (the document's oneOf, which the generator may not follow).
    if (schedule.cron !== undefined && schedule.interval_seconds !== undefined) delete schedule.interval_seconds;
    if (schedule.cron === undefined && schedule.interval_seconds === undefined) schedule.interval_seconds = 3600;
    if (schedule.cron !== undefined) schedule.cron = '*/15 * * * *';
    if (typeof schedule.interval_seconds === 'number') schedule.interval_seconds = Math.min(schedule.interval_seconds, MAX_INTERVAL_SECONDS);
    // A zone must be one the runtime knows, and only goes with a cron; full_sync_every's duration
    // syntax ("7d") is stated in words.
    if (schedule.timezone !== undefined) {
      if (schedule.cron === undefined) delete schedule.timezone;
      else schedule.timezone = 'Europe/Berlin';
    }
    if (schedule.full_sync_every !== undefined) schedule.full_sync_every = typeof schedule.full_sync_every === 'string' ? '7d' : 7;
  }

  /** A connection of its own for one backfill (one backfill may be active per connection), with no workflow. */
  async function backfillTarget(i: number): Promise<string> {
    const { rows } = await stack.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, $2) returning id`,
      [`backfill-${i}`, { records_per_resource: 5, page_size: 5 }],
    );
    return rows[0]!.id;
  }

  const adjust: Record<string, (body: Json, i: number) => Promise<{ path: string; body: Json }> | { path: string; body: Json }> = {
    'POST /connections': (body, i) => {
      body.status = 'paused';
      body.app_key = `g${i}-${String(body.app_key ?? '')}`.slice(0, 64);
      if (body.provider === 'demo' && body.config) delete body.config.world;
      if (body.provider === 'github' && body.config?.base_url !== undefined) body.config.base_url = github.baseUrl;
      if (body.provider === 'http' && body.config) {
        body.config.base_url = github.baseUrl;
        delete body.config.headers; // header names must be tokens (RFC 9110), stated in words
      }
      adjustSchedule(body.schedule);
      return { path: '/connections', body };
    },
    'POST /sync': (body) => {
      body.app_key = target.appKey;
      // The admin key must name the app key's tenant.
      body.tenant_id = target.tenantId;
      if (body.resource_types !== undefined) body.resource_types = ownTypes(body.resource_types);
      return { path: '/sync', body };
    },
    'POST /connections/{id}/sync': (body) => {
      if (body.resource_types !== undefined) body.resource_types = ownTypes(body.resource_types);
      return { path: `/connections/${target.id}/sync`, body };
    },
    'POST /jobs/schedule': async (body, i) => {
      body.pairId = await backfillTarget(i);
      if (body.connectorId !== undefined) body.connectorId = body.pairId;
      if (body.window) {
        const [start, end] = [body.window.start, body.window.end].sort((a, b) => Date.parse(a) - Date.parse(b));
        body.window = { start, end: Date.parse(start!) === Date.parse(end!) ? new Date(Date.parse(end!) + 1000).toISOString() : end };
      }
      if (body.payload && 'resource_types' in body.payload) body.payload.resource_types = ownTypes(body.payload.resource_types);
      return { path: '/jobs/schedule', body };
    },
  };

  it('the create-connection body is a union of the providers, each with its connector config', () => {
    const schema = operation('POST', '/connections').requestBody.content['application/json'].schema;
    const resolved = schema.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema;
    const branches = (resolved.oneOf ?? resolved.anyOf ?? []).map((b: Json) => (b.$ref ? doc.components.schemas[b.$ref.split('/').pop()] : b));
    expect(branches.map((b: Json) => b.properties.provider.enum ?? [b.properties.provider.const]).flat().sort()).toEqual(['demo', 'github', 'http']);
    const github = branches.find((b: Json) => (b.properties.provider.enum ?? [b.properties.provider.const]).includes('github'));
    expect(github.properties.config.required).toEqual(['repositories']);
  });

  for (const [index, route] of Object.keys(adjust).entries()) {
    it(`${route}: generated bodies are never answered 500, only with documented statuses, never 400 invalid_request`, async () => {
      const [method, path] = route.split(' ') as [string, string];
      const documented = Object.keys(operation(method, path).responses).map(Number);
      const bodies = generate(method, path, PER_ROUTE, 1000 * (index + 1));
      const wrong: { body: Json; status: number; answer: unknown }[] = [];
      const statuses = new Map<number, number>();
      for (const [i, generated] of bodies.entries()) {
        const request = await adjust[route]!(structuredClone(generated), i);
        const answer = await call(method, request.path, request.body);
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        const refused = answer.status === 400 && answer.body?.error?.code === 'invalid_request';
        if (answer.status >= 500 || refused || !documented.includes(answer.status)) wrong.push({ body: request.body, status: answer.status, answer: answer.body });
      }
      // A 500's cause is in the API's error log: name it in the failure.
      const errors = apiLog.lines.filter((l) => l.level === 'error').map((l) => JSON.stringify(l.err)).slice(0, 3);
      expect(wrong.slice(0, 5), `${wrong.length} of ${bodies.length} wrong; statuses ${JSON.stringify([...statuses])}; errors ${errors.join(' | ')}`).toEqual([]);
      // The bodies reached the commands, and most were accepted.
      const accepted = [...statuses].filter(([status]) => status < 300).reduce((sum, [, n]) => sum + n, 0);
      expect(accepted, JSON.stringify([...statuses])).toBeGreaterThanOrEqual(PER_ROUTE / 2);
    });
  }
});
