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

/** Creates the process logger: JSON lines on stdout with credentials redacted. */
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { service: 'synctide', ...bindings },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}

export type { Logger };
