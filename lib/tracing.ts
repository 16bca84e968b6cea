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
import { createRequire } from 'node:module';
import type { RequestOptions } from 'node:http';
import { context, propagation, trace, type Attributes } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { detectResourcesSync, envDetectorSync, Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import type { ClientInterceptors } from '@temporalio/client';
import type { InjectedSinks, WorkerInterceptors } from '@temporalio/worker';

/** Tracing of this process, once started. */
export interface Tracing {
  resource: Resource;
  /** Where spans go, workflow spans (from the worker's sink) included. */
  processor: SpanProcessor;
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
 * Starts tracing once per process: a tracer provider registered globally (W3C trace context,
 * async-local context), its spans batched to `exporter` (default: OTLP over HTTP/protobuf to
 * OTEL_EXPORTER_OTLP_ENDPOINT, with the SDK's other OTEL_* variables honoured), or to `processor`
 * when given (tests: a simple processor on an in-memory exporter); and the http and pg
 * instrumentations. Spans of outbound requests and queries are made only inside a traced piece
 * of work (not for a metrics scrape's queries); query values are never recorded, nor URL queries.
 */
export function startTracing(options: { process: string; exporter?: SpanExporter; processor?: SpanProcessor }): Tracing {
  if (current) return current;
  const resource = Resource.default()
    .merge(new Resource({ 'service.name': 'synctide', 'synctide.process': options.process }))
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
    .merge(detectResourcesSync({ detectors: [envDetectorSync] }));
  const processor = options.processor ?? new BatchSpanProcessor(options.exporter ?? new OTLPTraceExporter());
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  provider.register();
  const unregister = registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({
        // The API's request spans come from its Hono middleware (with the matched route).
        disableIncomingRequestInstrumentation: true,
        requireParentforOutgoingSpans: true,
        startOutgoingSpanHook: (request) => urlAttributesWithoutQuery(request as RequestOptions),
      }),
      new PgInstrumentation({ requireParentSpan: true, enhancedDatabaseReporting: false }),
    ],
  });
  // The modules are patched when required: require them here, so the same module objects that
  // this project's ESM imports hold (node:http, node:https, pg) are patched at once.
  const require = createRequire(import.meta.url);
  for (const name of ['http', 'https', 'pg', 'pg-pool']) require(name);
  const tracing: Tracing = {
    resource,
    processor,
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
  return current ? { workflow: [new OpenTelemetryWorkflowClientInterceptor()] } : undefined;
}

/**
 * What a worker adds for tracing: with tracing on, a span for each activity run (a child of the
 * workflow's StartActivity span when the run is traced) and the trace ids on the SDK's activity
 * log lines; always, the `exporter` sink traced workflow runs hand their spans to (dropped when
 * this process does not trace, so a traced run never fails on a worker that does not).
 */
export function temporalWorkerTracing(): { interceptors: WorkerInterceptors; sinks: InjectedSinks<Record<string, never>> } {
  const tracing = current;
  const exporter = tracing ? makeWorkflowExporter(tracing.processor, tracing.resource) : { export: { fn: () => undefined } };
  return {
    interceptors: tracing
      ? { activity: [(ctx) => ({ inbound: new OpenTelemetryActivityInboundInterceptor(ctx), outbound: new OpenTelemetryActivityOutboundInterceptor(ctx) })] }
      : {},
    sinks: { exporter } as unknown as InjectedSinks<Record<string, never>>,
  };
}
