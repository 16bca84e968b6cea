import { pino, type Logger } from 'pino';

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

/** Creates the process logger: JSON lines on stdout with credentials and statement values left out. */
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { service: 'synctide', ...bindings },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    serializers: { err: serializeError, error: serializeError },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}

export type { Logger };
