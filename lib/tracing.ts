// OpenTelemetry traces of a process: off unless OTEL_EXPORTER_OTLP_ENDPOINT is configured (or a
// test starts it with its own exporter). Off, no SDK is registered: the API's global tracer is a
// no-op, no module is patched, no Temporal interceptor is installed and no span is made.
//
// On, one trace follows a request through the process boundary and Temporal: the API's request
// span (@hono/otel) → the client's StartWorkflow/SignalWorkflow span (its context travels in the
// workflow's headers) → the workflow run and the activities it schedules (workflow interceptors,
// workflows/tracing-interceptors.ts, exported through the worker's `exporter` sink) → each
// activity's run → its provider requests (node:http/https, which lib/outbound.ts uses) and
// Postgres queries (pg). Pino lines logged inside a span carry its trace_id and span_id
// (lib/logger.ts).
//
// Off, nothing of OpenTelemetry is loaded but its API (a no-op, which the logger asks for the
// active span): the SDK, its exporter, the instrumentations and the Temporal and Hono
// interceptors are imported by startTracing only; this module imports their types alone.
import { createRequire } from 'node:module';
import type { RequestOptions } from 'node:http';
import { context, propagation, trace, type Attributes, type TextMapPropagator } from '@opentelemetry/api';
import type { Instrumentation } from '@opentelemetry/instrumentation';
import type { Resource } from '@opentelemetry/resources';
import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ClientInterceptors } from '@temporalio/client';
import type { InjectedSinks, WorkerInterceptors } from '@temporalio/worker';
import type { MiddlewareHandler } from 'hono';

/** Tracing of this process, once started. */
export interface Tracing {
  resource: Resource;
  /** Where spans go, workflow spans (from the worker's sink) included. */
  processor: SpanProcessor;
  /** A new request-span middleware of the API (@hono/otel): each request's span, named by its route. */
  requestSpans(): MiddlewareHandler;
  /** The Temporal client's interceptors: starts and signals carry the trace context. */
  clientInterceptors(): ClientInterceptors;
  /** A worker's activity interceptors, and the `exporter` sink of traced workflow runs. */
  workerTracing(): { interceptors: WorkerInterceptors; sinks: InjectedSinks<Record<string, never>> };
  /** Ends spans in flight, exports what is buffered, and unregisters everything. */
  shutdown(): Promise<void>;
}

let current: Tracing | undefined;

/** This process's tracing, or undefined while it is off. */
export function activeTracing(): Tracing | undefined {
  return current;
}

/**
 * URL attributes of an outbound request without its query: a connection may send its credential
 * as a query parameter, and spans must not carry it.
 */
export function urlAttributesWithoutQuery(options: RequestOptions): Attributes {
  const path = (options.path ?? '/').split('?')[0]!;
  const host = options.hostname ?? options.host ?? 'localhost';
  const port = options.port ? `:${options.port}` : '';
  const full = `${options.protocol ?? 'http:'}//${host}${port}${path}`;
  return { 'http.url': full, 'url.full': full, 'http.target': path };
}

/**
 * W3C trace context, the `traceparent` alone: a caller's `tracestate` (its vendors' state) is not
 * taken in, and baggage is neither read nor sent (OTEL_PROPAGATORS does not apply). So nothing a
 * caller sends beside its trace's and span's ids reaches a workflow's headers (the Temporal
 * history), a provider or a webhook receiver.
 */
function traceparentOnly(w3c: TextMapPropagator): TextMapPropagator {
  return {
    inject: (ctx, carrier, setter) => w3c.inject(ctx, carrier, setter),
    extract: (ctx, carrier, getter) => w3c.extract(ctx, carrier, { keys: (c) => getter.keys(c), get: (c, key) => (key === 'tracestate' ? undefined : getter.get(c, key)) }),
    fields: () => ['traceparent'],
  };
}

/** The http and pg instrumentations of this process, made by its first start of tracing. */
let instrumentations: Instrumentation[] | undefined;

/**
 * Starts tracing once per process: a tracer provider registered globally (W3C `traceparent`
 * alone, async-local context), its spans batched to `exporter` (default: OTLP over HTTP/protobuf to
 * OTEL_EXPORTER_OTLP_ENDPOINT, with the SDK's other OTEL_* variables honoured), or to `processor`
 * when given (tests: a simple processor on an in-memory exporter); and the http and pg
 * instrumentations. Spans of outbound requests and queries are made only inside a traced piece
 * of work (not for a metrics scrape's queries); query values are never recorded, nor URL queries.
 * The SDK's packages are loaded here, and only here.
 */
export async function startTracing(options: { process: string; exporter?: SpanExporter; processor?: SpanProcessor }): Promise<Tracing> {
  if (current) return current;
  const [{ httpInstrumentationMiddleware }, { W3CTraceContextPropagator }, { OTLPTraceExporter }, { registerInstrumentations }, { HttpInstrumentation }, { PgInstrumentation }, resources, { BatchSpanProcessor }, { NodeTracerProvider }, temporal] =
    await Promise.all([
      import('@hono/otel'),
      import('@opentelemetry/core'),
      import('@opentelemetry/exporter-trace-otlp-proto'),
      import('@opentelemetry/instrumentation'),
      import('@opentelemetry/instrumentation-http'),
      import('@opentelemetry/instrumentation-pg'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/sdk-trace-node'),
      import('@temporalio/interceptors-opentelemetry'),
    ]);
  // Started by a concurrent call while they loaded.
  if (current) return current;
  const resource = resources.Resource.default()
    .merge(new resources.Resource({ 'service.name': 'synctide', 'synctide.process': options.process }))
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
    .merge(resources.detectResourcesSync({ detectors: [resources.envDetectorSync] }));
  const processor = options.processor ?? new BatchSpanProcessor(options.exporter ?? new OTLPTraceExporter());
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  provider.register({ propagator: traceparentOnly(new W3CTraceContextPropagator()) });
  // One instance of each instrumentation a process: a module is patched when it is first required
  // with its instrumentation enabled and is then never offered to another instance, so tracing
  // started again in one process (after a shutdown: tests) enables these again, which patches the
  // modules they patched before.
  instrumentations ??= [
    new HttpInstrumentation({
      // The API's request spans come from its Hono middleware (with the matched route).
      disableIncomingRequestInstrumentation: true,
      requireParentforOutgoingSpans: true,
      startOutgoingSpanHook: (request) => urlAttributesWithoutQuery(request as RequestOptions),
    }),
    new PgInstrumentation({ requireParentSpan: true, enhancedDatabaseReporting: false }),
  ];
  const unregister = registerInstrumentations({ tracerProvider: provider, instrumentations });
  // registerInstrumentations enables only an instrumentation whose config says disabled; one a
  // shutdown disabled is enabled here (a no-op for one just made).
  for (const instrumentation of instrumentations) instrumentation.enable();
  // The modules are patched when required: require them here, so the same module objects that
  // this project's ESM imports hold (node:http, node:https, pg) are patched at once.
  const require = createRequire(import.meta.url);
  for (const name of ['http', 'https', 'pg', 'pg-pool']) require(name);
  const exporter = temporal.makeWorkflowExporter(processor, resource);
  const tracing: Tracing = {
    resource,
    processor,
    requestSpans: () => httpInstrumentationMiddleware({ captureActiveRequests: false }),
    clientInterceptors: () => ({ workflow: [new temporal.OpenTelemetryWorkflowClientInterceptor()] }),
    workerTracing: () => ({
      interceptors: {
        activity: [(ctx) => ({ inbound: new temporal.OpenTelemetryActivityInboundInterceptor(ctx), outbound: new temporal.OpenTelemetryActivityOutboundInterceptor(ctx) })],
      },
      sinks: { exporter } as unknown as InjectedSinks<Record<string, never>>,
    }),
    async shutdown() {
      unregister();
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
      current = undefined;
    },
  };
  current = tracing;
  return tracing;
}

/** The Temporal client's interceptors: with tracing on, starts and signals carry the trace context. */
export function temporalClientInterceptors(): ClientInterceptors | undefined {
  return current?.clientInterceptors();
}

/**
 * What a worker adds for tracing: with tracing on, a span for each activity run (a child of the
 * workflow's StartActivity span when the run is traced) and the trace ids on the SDK's activity
 * log lines; always, the `exporter` sink traced workflow runs hand their spans to (dropped when
 * this process does not trace, so a traced run never fails on a worker that does not).
 */
export function temporalWorkerTracing(): { interceptors: WorkerInterceptors; sinks: InjectedSinks<Record<string, never>> } {
  return current?.workerTracing() ?? { interceptors: {}, sinks: { exporter: { export: { fn: () => undefined } } } as unknown as InjectedSinks<Record<string, never>> };
}
