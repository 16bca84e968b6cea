import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { CommandRefused, type Refusal } from '../commands/errors';
import type { ApiErrorCode } from '../policy/vocabulary';
import { issueProblem, listProblems, type InputIssue } from '../policy/problems';

/** The HTTP status of each way a command can refuse. */
const REFUSAL_STATUS: Record<Refusal, ContentfulStatusCode> = { invalid: 400, not_found: 404, conflict: 409, gone: 410, failed: 502, timeout: 504, limited: 429 };

/** An error the API answers with its own status, code and message (never internals). */
export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: ApiErrorCode,
    message: string,
    /** Extra fields placed beside code and message (e.g. the alert of a paused connection). */
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The JSON body of every error answer. */
export function errorBody(code: ApiErrorCode, message: string, details?: Record<string, unknown>) {
  return { error: { code, message, ...details } };
}

/**
 * Answers `err` as JSON: its own status for an ApiError, the status of its refusal for a command
 * that refused, 503 `busy` when no connection of the pool was free in time, 503 `unavailable` when a
 * server is unreachable (each with Retry-After), else 500.
 */
export function errorResponse(c: Context, err: unknown): Response {
  if (err instanceof ApiError) return c.json(errorBody(err.code, err.message, err.details), err.status);
  if (err instanceof CommandRefused) {
    // A refusal for a rate-type limit says when to try again.
    const retryAfter = err.details?.retry_after_seconds;
    if (err.reason === 'limited' && typeof retryAfter === 'number') c.header('Retry-After', String(retryAfter));
    return c.json(errorBody(err.code, err.message, err.details), REFUSAL_STATUS[err.reason]);
  }
  // Hono's own refusals, e.g. a body that is not JSON, or not declared JSON.
  if (err instanceof HTTPException && err.status === 415) {
    return c.json(errorBody('unsupported_media_type', 'the request body must be JSON, sent with content-type: application/json'), 415);
  }
  if (err instanceof HTTPException && err.status < 500) {
    const code = err.status === 400 ? 'invalid_request' : err.status === 413 ? 'payload_too_large' : 'error';
    return c.json(errorBody(code, err.message || 'bad request'), err.status);
  }
  if (poolExhausted(err)) {
    c.header('Retry-After', String(RETRY_AFTER_SECONDS));
    return c.json(errorBody('busy', DATABASE_BUSY_MESSAGE), 503);
  }
  const unavailable = unavailableServer(err);
  if (unavailable) {
    c.header('Retry-After', String(RETRY_AFTER_SECONDS));
    return c.json(errorBody('unavailable', `${unavailable} is unreachable; try again shortly`), 503);
  }
  return c.json(errorBody('internal', 'internal error'), 500);
}

/** The refusal of a URL holding a NUL character (`%00`), before any route (the probes' only 400). */
export const NUL_IN_URL_MESSAGE = 'url: must not contain NUL (\\u0000) characters';

/** Seconds a 503 asks the client to wait before trying again. */
const RETRY_AFTER_SECONDS = 5;

/** What a request that found no free connection of the API's pool is told. */
export const DATABASE_BUSY_MESSAGE = 'the database is busy (every connection of this API process is in use); try again shortly';

/**
 * node-postgres's pool refuses a request with this when it waited its whole connection timeout
 * for a connection while the pool held its maximum (every connection checked out, or being
 * opened): the pool was busy. A connection that could not be opened fails otherwise (a network
 * errno, or "Connection terminated due to connection timeout").
 */
const POOL_EXHAUSTED = 'timeout exceeded when trying to connect';

/** Whether `err` (or one of its causes) is the pool's refusal after waiting for a free connection. */
export function poolExhausted(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { message?: unknown }).message === POOL_EXHAUSTED) return true;
  }
  return false;
}

// Network-level failures of pg (node errno codes, pool/connection messages) and Postgres' own
// "cannot connect now" family (SQLSTATE class 08, 57P01–57P03).
const PG_NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN']);
const PG_MESSAGES = /Connection terminated|Client has encountered a connection error|Connection ended unexpectedly/i;
// gRPC status codes of an unreachable or overloaded Temporal frontend: UNAVAILABLE, DEADLINE_EXCEEDED.
const GRPC_UNAVAILABLE = new Set([14, 4]);

/** Which server a failure says is unreachable ('Postgres' | 'Temporal'), or null for any other error. */
export function unavailableServer(err: unknown): 'Postgres' | 'Temporal' | null {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, name, message } = e as { code?: unknown; name?: string; message?: string };
    if (name === 'ServiceError' || name === 'ConnectionError' || name === 'TransportError') {
      const grpc = (e as { cause?: { code?: number } }).cause?.code;
      if (grpc === undefined || GRPC_UNAVAILABLE.has(grpc)) return 'Temporal';
    }
    if (typeof code === 'number' && GRPC_UNAVAILABLE.has(code) && 'details' in (e as object)) return 'Temporal';
    if (typeof code === 'string' && (PG_NET_CODES.has(code) || code.startsWith('08') || /^57P0[123]$/.test(code))) return 'Postgres';
    if (typeof message === 'string' && PG_MESSAGES.test(message)) return 'Postgres';
  }
  return null;
}

/** The issues of a failed zod parse as one message: `path: problem; path: problem` (`listProblems`: the first ones, the rest counted). */
export function describeIssues(issues: readonly InputIssue[]): string {
  return listProblems(issues.map((i) => `${i.path.map(String).join('.') || 'body'}: ${issueProblem(i)}`));
}
