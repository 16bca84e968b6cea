import { isSpanContextValid, trace } from '@opentelemetry/api';
import { pino, type Logger, type LoggerOptions } from 'pino';

/** Paths pino replaces with "[redacted]": credentials and auth headers never reach a log line. */
export const REDACT_PATHS = [
  'credentials',
  '*.credentials',
  'token',
  '*.token',
  'password',
  '*.password',
  'authorization',
  '*.authorization',
  'headers.authorization',
  'req.headers.authorization',
  '*.headers.authorization',
  'DATABASE_URL',
  'DATABASE_MIGRATION_URL',
  'DATABASE_PASSWORD',
  'DATABASE_MIGRATION_PASSWORD',
  'ADMIN_API_KEY',
  'TEMPORAL_API_KEY',
  'apiKey',
  '*.apiKey',
];

/**
 * Fields of an error never logged: Postgres' `detail` and `where` quote the values of the failed
 * statement (a NUL in one JSON field quotes its neighbours, credentials among them), `hint`,
 * `internalQuery` and the positions point into it, and query parameters are the values themselves.
 */
const HIDDEN_ERROR_FIELDS = ['detail', 'where', 'hint', 'internalQuery', 'position', 'internalPosition', 'parameters', 'params', 'values', 'query', 'text'];

/** Pino's error serializer without HIDDEN_ERROR_FIELDS, on the error and its causes. */
export function serializeError(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const out = pino.stdSerializers.err(err) as unknown as Record<string, unknown>;
  const scrub = (value: Record<string, unknown>, depth: number) => {
    for (const field of HIDDEN_ERROR_FIELDS) delete value[field];
    if (depth < 5 && value.cause && typeof value.cause === 'object') scrub(value.cause as Record<string, unknown>, depth + 1);
  };
  scrub(out, 0);
  return out;
}

/** The trace and span of the active span, when the line is logged inside a traced piece of work. */
function traceFields(): Record<string, string> {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const ctx = span.spanContext();
  return isSpanContextValid(ctx) ? { trace_id: ctx.traceId, span_id: ctx.spanId } : {};
}

/**
 * How every line looks: `"level":"info"` as a word (log explorers need no mapping from pino's
 * numbers), and `trace_id`/`span_id` on lines logged inside a span (lib/tracing.ts; while tracing
 * is off there is never an active span and nothing is added).
 */
export const LINE_SHAPE = {
  formatters: { level: (label: string) => ({ level: label }) },
  mixin: traceFields,
} satisfies LoggerOptions;

/**
 * Creates the process logger: JSON lines on stdout with credentials and statement values left out.
 * Each line is written before the call returns (a synchronous destination): pino's default writes
 * through the libuv thread pool, and a line still queued there when the process exits (the
 * shutdown's `process.exit`, a failed start) was written after the lines logged later, or lost.
 */
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino(
    {
      ...LINE_SHAPE,
      level,
      base: { service: 'synctide', ...bindings },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: { err: serializeError, error: serializeError },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.destination({ dest: 1, sync: true }),
  );
}

export type { Logger };
