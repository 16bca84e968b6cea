// Workflow side of tracing, bundled beside the workflows as an interceptor module
// (infra/workflow-bundle.ts). A run is traced only when it was started with a trace context (the
// `_tracer-data` header a traced client adds, holding a W3C `traceparent`): its execution, the
// activities and child workflows it starts and the signals it sends then become spans of that
// trace (@temporalio/interceptors-opentelemetry, handed to the worker's `exporter` sink). Any other
// run (started by an untraced client, and every run recorded before tracing existed) gets no
// interceptor at all, so it replays exactly as before and costs nothing. The decision reads the
// run's start event only: it is the same on every replay.
//
// A traced run's continue-as-new is not traced: the next run of a long-lived workflow (a
// connection's scheduler) starts untraced instead of staying inside one request's trace forever.
//
// OpenTelemetry's workflow modules are loaded by the first traced run only. The bundle evaluates
// its interceptor modules for every new run (each cycle of a connection is one), and evaluating
// OpenTelemetry's took a fifth of the workflow thread's time in a profile of a busy worker, for
// runs that are nearly all untraced. Loading them inside a traced run's first activation changes
// no command: the same run loads them at the same point on every replay.
import { defaultPayloadConverter, type Headers } from '@temporalio/common';
import type * as OpenTelemetryWorkflow from '@temporalio/interceptors-opentelemetry/lib/workflow';
import type { WorkflowInboundCallsInterceptor, WorkflowInterceptors, WorkflowInternalsInterceptor, WorkflowOutboundCallsInterceptor } from '@temporalio/workflow';

/** OpenTelemetry's workflow interceptors, evaluated on first use (a synchronous require inside the bundle). */
function openTelemetry(): typeof OpenTelemetryWorkflow {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- lazy on purpose (above); the bundler resolves it
  return require('@temporalio/interceptors-opentelemetry/lib/workflow') as typeof OpenTelemetryWorkflow;
}

/** The header a traced client puts its trace context in. */
const TRACE_HEADER = '_tracer-data';

/** True when `headers` carry a trace context (a `traceparent`) from a traced caller. */
export function carriesTrace(headers: Headers): boolean {
  const payload = headers[TRACE_HEADER];
  if (!payload) return false;
  try {
    const carrier = defaultPayloadConverter.fromPayload<Record<string, unknown> | null>(payload);
    return typeof carrier?.traceparent === 'string';
  } catch {
    return false;
  }
}

interface Traced {
  inbound: OpenTelemetryWorkflow.OpenTelemetryInboundInterceptor;
  outbound: OpenTelemetryWorkflow.OpenTelemetryOutboundInterceptor;
  internals: OpenTelemetryWorkflow.OpenTelemetryInternalsInterceptor;
}

/** The interceptors of one run: pass-throughs until its start shows a trace context. */
export const interceptors = (): WorkflowInterceptors => {
  let traced: Traced | undefined;
  const inbound: WorkflowInboundCallsInterceptor = {
    execute(input, next) {
      if (!carriesTrace(input.headers)) return next(input);
      const otel = openTelemetry();
      traced = { inbound: new otel.OpenTelemetryInboundInterceptor(), outbound: new otel.OpenTelemetryOutboundInterceptor(), internals: new otel.OpenTelemetryInternalsInterceptor() };
      return traced.inbound.execute(input, next);
    },
    handleSignal: (input, next) => (traced ? traced.inbound.handleSignal(input, next) : next(input)),
    handleQuery: (input, next) => (traced ? traced.inbound.handleQuery(input, next) : next(input)),
    handleUpdate: (input, next) => (traced ? traced.inbound.handleUpdate(input, next) : next(input)),
    validateUpdate: (input, next) => (traced ? traced.inbound.validateUpdate(input, next) : next(input)),
  };
  const outbound: WorkflowOutboundCallsInterceptor = {
    scheduleActivity: (input, next) => (traced ? traced.outbound.scheduleActivity(input, next) : next(input)),
    scheduleLocalActivity: (input, next) => (traced ? traced.outbound.scheduleLocalActivity(input, next) : next(input)),
    startChildWorkflowExecution: (input, next) => (traced ? traced.outbound.startChildWorkflowExecution(input, next) : next(input)),
    signalWorkflow: (input, next) => (traced ? traced.outbound.signalWorkflow(input, next) : next(input)),
    getLogAttributes: (input, next) => (traced ? traced.outbound.getLogAttributes(input, next) : next(input)),
  };
  const internals: WorkflowInternalsInterceptor = {
    dispose: (input, next) => (traced ? traced.internals.dispose(input, next) : next(input)),
  };
  return { inbound: [inbound], outbound: [outbound], internals: [internals] };
};
