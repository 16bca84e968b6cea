// The API's request spans carry no secret from the request's URL: the OAuth callback's `code` and
// `state` (and any other query value) are left out of `url.full`, as they are of outbound spans.
// The real API app and Postgres; spans land in an in-memory exporter.
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, describe, expect, it } from 'vitest';
import { startTracing } from '../lib/tracing';
import { TEST_API_KEY, useApiWithoutTemporal } from './helpers/api';

// Started before the API app is built (it takes its request-span middleware from it).
const exporter = new InMemorySpanExporter();
const tracing = await startTracing({ process: 'test', processor: new SimpleSpanProcessor(exporter) });

describe("request spans and the request's URL", () => {
  const api = useApiWithoutTemporal('traces-request-url');
  afterAll(async () => {
    await tracing.shutdown();
  });

  it("records the OAuth callback's path and route, never its code or state (nor another route's query values)", async () => {
    const code = 'oauth-code-never-in-a-span-0123456789';
    const state = 'oauth-state-never-in-a-span-0123456789';
    exporter.reset();
    const callback = await api.app.request(`http://127.0.0.1/oauth/callback?code=${code}&state=${state}`);
    expect(callback.status).toBe(400);
    const listed = await api.app.request('http://127.0.0.1/connections?tenant_id=query-value-never-in-a-span', { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    expect(listed.status).toBe(200);
    const spans = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER);
    expect(spans.map((s) => s.name).sort()).toEqual(['GET /connections', 'GET /oauth/callback']);
    expect(spans.map((s) => s.attributes['url.full']).sort()).toEqual(['http://127.0.0.1/connections', 'http://127.0.0.1/oauth/callback']);
    const everything = JSON.stringify(exporter.getFinishedSpans().map((s) => ({ name: s.name, attributes: s.attributes, events: s.events })));
    for (const secret of [code, state, 'query-value-never-in-a-span']) expect(everything).not.toContain(secret);
  });
});
