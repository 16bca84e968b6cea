// Traces end to end: one `POST /connections/{id}/sync` is one trace, from the API's request span
// through the workflow start, the job's workflow run and its activities to the provider request
// and Postgres queries, and the log lines of that work carry its trace id. Real API, Temporal dev
// server, worker, Postgres and a fake provider on 127.0.0.1; spans land in an in-memory exporter.
import { randomUUID } from 'node:crypto';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sealCredentials } from '../lib/credentials';
import { startTracing, temporalClientInterceptors, temporalWorkerTracing } from '../lib/tracing';
import { startTestApi, TEST_API_KEY, type TestApi } from './helpers/api';
import { TEST_KEYRING } from './helpers/deps';
import { initialItems, startFakeHttpProvider, type FakeHttpProvider } from './helpers/fake-http-provider';
import { serve } from './helpers/fake-server';
import { capturingLogger } from './helpers/logs';
import { useWorkerStack } from './helpers/stack';
import { eventually, synctideBundle } from './helpers/worker';

// Started before the worker and the API exist (they take their interceptors and middleware from it).
const exporter = new InMemorySpanExporter();
const tracing = await startTracing({ process: 'test', processor: new SimpleSpanProcessor(exporter) });

const TASK_QUEUE = 'traces';
/** Sent as a query parameter (`auth: query`): no span may carry it. */
const TOKEN = 'tok_traces_query_secret_0123456789';

describe('traces', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  let provider: FakeHttpProvider;
  let api: TestApi;
  let client: Client;
  const apiLog = capturingLogger();

  beforeAll(async () => {
    provider = await startFakeHttpProvider({ size: 4, initial: initialItems(6, Date.parse('2025-01-01T00:00:00Z')) });
    client = new Client({ connection: stack.env.connection, namespace: 'default', interceptors: temporalClientInterceptors() });
    api = await startTestApi(stack, TASK_QUEUE, { temporal: client, logger: apiLog.logger });
  });
  afterAll(async () => {
    await api?.server.close();
    await provider?.close();
    await tracing.shutdown();
  });

  it('one POST /connections/{id}/sync is one trace from the request to the provider request and Postgres, and its log lines carry the trace id', async () => {
    const id = randomUUID();
    const config = {
      base_url: provider.baseUrl,
      auth: { type: 'query', name: 'api_key' },
      pagination: { type: 'link_header' },
      resources: { items: { path: '/link/items', id: 'id', updated_at: 'updated_at' } },
    };
    await stack.db.pool.query(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials) values ($1, 'acme', 'http', $2, $3, $4)`,
      [id, `traces-${id}`, config, JSON.stringify(sealCredentials(TEST_KEYRING, id, { token: TOKEN }))],
    );
    exporter.reset();

    const answer = await api.call('POST', `/connections/${id}/sync`, { mode: 'full' });
    expect(answer.status).toBe(202);
    const jobId = String(answer.body.job_id);
    await eventually(async () => ((await api.call('GET', `/jobs/${jobId}`)).body.status === 'completed' ? true : undefined));

    const request = exporter.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER && s.name === 'POST /connections/:id/sync');
    expect(request).toBeDefined();
    const traceId = request!.spanContext().traceId;
    // The workflow's own spans reach the exporter through the worker's sink once its run ended.
    const spans = await eventually(async () => {
      const inTrace = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
      return inTrace.some((s) => s.name === 'RunWorkflow:syncJobWorkflow') ? inTrace : undefined;
    });
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    /** The names of a span and its ancestors, the span first. */
    const path = (span: ReadableSpan): string[] => {
      const names: string[] = [];
      for (let at: ReadableSpan | undefined = span; at; at = at.parentSpanId ? byId.get(at.parentSpanId) : undefined) names.push(at.name);
      return names;
    };
    const names = new Set(spans.map((s) => s.name));
    console.log(`trace ${traceId}: ${spans.length} spans\n${spans.map((s) => `  ${path(s).reverse().join(' > ')}`).sort().join('\n')}`);

    // Every span of the trace descends from the request: nothing lost its parent on the way.
    for (const span of spans) expect(path(span).at(-1)).toBe('POST /connections/:id/sync');
    expect(names).toContain('StartWorkflow:syncJobWorkflow');
    expect(names).toContain('RunWorkflow:syncJobWorkflow');
    expect(names).toContain('RunActivity:syncTask');

    // The provider request, under the sync task's activity, without its query (the secret).
    const providerCalls = spans.filter((s) => s.kind === SpanKind.CLIENT && String(s.attributes['http.url'] ?? '').startsWith(provider.baseUrl));
    expect(providerCalls.length).toBeGreaterThan(0);
    for (const call of providerCalls) expect(path(call)).toContain('RunActivity:syncTask');
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain(TOKEN);

    // Postgres queries, in the API's request and in the activities, with their statements but no values.
    const queries = spans.filter((s) => s.attributes['db.system'] === 'postgresql');
    expect(queries.some((q) => path(q)[1] === 'POST /connections/:id/sync')).toBe(true);
    expect(queries.some((q) => path(q).includes('RunActivity:syncTask'))).toBe(true);
    expect(queries.some((q) => 'db.statement' in q.attributes)).toBe(true);
    expect(queries.every((q) => !('db.postgresql.values' in q.attributes))).toBe(true);

    // Log lines of that work: the API's request line and every worker line of the job.
    const requestLine = apiLog.lines.find((l) => l.msg === 'request' && l.method === 'POST' && String(l.path).endsWith('/sync'));
    expect(requestLine).toMatchObject({ level: 'info', trace_id: traceId, span_id: expect.stringMatching(/^[0-9a-f]{16}$/) });
    const jobLines = stack.lines.filter((l) => l.job_id === jobId);
    expect(jobLines.map((l) => l.msg)).toContain('sync job finished');
    for (const line of jobLines) expect({ msg: line.msg, trace_id: line.trace_id }).toEqual({ msg: line.msg, trace_id: traceId });

    // The traced run replays with its interceptors: they add no command.
    const history = await client.workflow.getHandle(String(answer.body.workflow_id)).fetchHistory();
    await Worker.runReplayHistory({ workflowBundle: await synctideBundle(), sinks: temporalWorkerTracing().sinks }, history, String(answer.body.workflow_id));
  });

  it("takes a caller's traceparent, but neither its tracestate nor its baggage: a provider request carries the traceparent alone", async () => {
    const seen = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('[]');
    });
    try {
      const id = randomUUID();
      const config = { base_url: seen.url, pagination: { type: 'none' }, resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at' } } };
      await stack.db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', $2, $3)`, [id, `traces-${id}`, config]);
      const callerTrace = '0af7651916cd43dd8448eb211c80319c';
      // What an operator's gateway may add: its vendors' state and baggage (who called, a session).
      const res = await fetch(`${api.server.url}/connections/${id}/sync`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TEST_API_KEY}`,
          'content-type': 'application/json',
          traceparent: `00-${callerTrace}-b7ad6b7169203331-01`,
          tracestate: 'gateway=internal-route-7',
          baggage: 'user.email=alice%40operator.example,session=s3cr3t',
        },
        body: JSON.stringify({ mode: 'full' }),
      });
      expect(res.status).toBe(202);
      const jobId = String(((await res.json()) as { job_id: string }).job_id);
      await eventually(async () => ((await api.call('GET', `/jobs/${jobId}`)).body.status === 'completed' ? true : undefined));

      expect(seen.requests.length).toBeGreaterThan(0);
      for (const request of seen.requests) {
        expect(request.headers.traceparent).toMatch(new RegExp(`^00-${callerTrace}-[0-9a-f]{16}-01$`));
        expect({ tracestate: request.headers.tracestate, baggage: request.headers.baggage }).toEqual({ tracestate: undefined, baggage: undefined });
      }
      const inTrace = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === callerTrace);
      expect(inTrace.map((s) => s.name)).toContain('RunActivity:syncTask');
      expect(inTrace.every((s) => s.spanContext().traceState === undefined)).toBe(true);
    } finally {
      await seen.close();
    }
  });

  it('a run started without a trace context makes no span', async () => {
    const before = exporter.getFinishedSpans().length;
    // The stack's own client has no tracing interceptor, like a process with tracing off.
    const workflowId = `untraced-${randomUUID()}`;
    const handle = await stack.env.client.workflow.start('immediateSyncWorkflow', {
      taskQueue: TASK_QUEUE,
      workflowId,
      args: [{ connectionId: randomUUID(), mode: 'incremental', resourceTypes: ['items'] }],
    });
    await handle.result().catch(() => undefined);
    // Spans this run could have made: a traced job of an earlier test may end its workflow span
    // meanwhile (a child of that test's trace); one made for this run would name it, or start a trace.
    const made = exporter
      .getFinishedSpans()
      .slice(before)
      .filter((s) => s.name.includes('Workflow') && (s.parentSpanId === undefined || JSON.stringify(s.attributes).includes(workflowId)));
    expect(made).toEqual([]);
  });
});
