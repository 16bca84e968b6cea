// Exit codes a script can branch on, and the one error type that carries them. Every failure of a
// command ends as a CliError: a refused argument, a configuration that is missing, an API error
// answer (by its HTTP status) or a job that ended other than completed.

/** The process exit codes of the CLI (documented in docs/cli.md; keep the two in step). */
export const EXIT = {
  /** The command did what it was asked. */
  ok: 0,
  /** Anything else: a 5xx answer, the API unreachable, an answer the CLI did not expect. */
  failure: 1,
  /** The command line was wrong (unknown command or flag, missing argument, bad value), no URL or
   * key is configured, or the API refused the request as invalid (400) or too large (413): retrying it cannot help. */
  usage: 2,
  /** The key was refused (401) or lacks the right (403: an admin route, a scope, another tenant). */
  auth: 3,
  /** What was named does not exist (404), or belongs to another tenant. */
  notFound: 4,
  /** The state forbids it now (409, 410): a taken app key, a finished job, a paused connection. */
  conflict: 5,
  /** A rate limit or a tenant limit answered 429: retry later. */
  limited: 6,
  /** A job the command waited for ended failed or cancelled. */
  jobFailed: 7,
  /** Stopped by Ctrl-C (SIGINT): a request in flight dropped, a wait or a follow stopped; what was running on the server goes on. */
  interrupted: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    /** The API's error code (`not_found`, `conflict`, …) when the API answered with an error. */
    readonly code?: string,
    readonly status?: number,
    /** The message without the code in front, for --json errors. */
    readonly detail: string = message,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/**
 * No answer at all: the connection to the API was refused or reset, or its name did not resolve
 * (exit 1). Its message names the API's origin and the cause (`ECONNREFUSED`, `ENOTFOUND`, …).
 */
export class UnreachableError extends CliError {
  constructor(origin: string, cause: string) {
    super(`cannot reach ${origin}: ${cause}`, EXIT.failure, 'unreachable');
    this.name = 'UnreachableError';
  }
}

/**
 * A failure as --json shows it (the `error` of the document on stderr, and of a retry object):
 * the API's error code (`usage` for a command-line mistake, `unreachable` for no answer, `error`
 * when nothing names it), the message, the exit code it leads to and the HTTP status if any.
 */
export function errorJson(err: CliError): { code: string; message: string; exit_code: ExitCode; status?: number } {
  return { code: err.code ?? 'error', message: err.detail, exit_code: err.exitCode, ...(err.status && { status: err.status }) };
}

/** A command-line mistake (exit 2). */
export const usage = (message: string) => new CliError(message, EXIT.usage, 'usage');

/** The exit code of an API error answer with HTTP `status`. */
export function exitCodeOfStatus(status: number): ExitCode {
  if (status === 400 || status === 413) return EXIT.usage;
  if (status === 401 || status === 403) return EXIT.auth;
  if (status === 404) return EXIT.notFound;
  if (status === 409 || status === 410) return EXIT.conflict;
  if (status === 429) return EXIT.limited;
  return EXIT.failure;
}

/** The CliError of an API error answer: its `error.code` and message when the body has them. */
export function apiError(status: number, body: unknown): CliError {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  const code = typeof error?.code === 'string' ? error.code : undefined;
  const message = typeof error?.message === 'string' ? error.message : `HTTP ${status}`;
  return new CliError(code ? `${code}: ${message}` : message, exitCodeOfStatus(status), code, status, message);
}

/**
 * Answers the API gives to be tried again (429 rate limited, 502, 503 busy or unavailable, 504):
 * what a command follows (a job, a feed) goes on on the server, so a read answered so is made
 * again, up to this many times in a row, each after a longer wait (retryWaitMs).
 */
export const MAX_RETRIED_POLLS = 5;
const RETRIED_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);
/**
 * The least wait before a read made again (a 503's Retry-After is a few seconds), unless
 * SYNCTIDE_RETRY_WAIT_MS sets another (Settings.retryWaitMs).
 */
export const MIN_RETRY_WAIT_MS = 1000;

/** True for the CliError of an answer that asks to be tried again. */
export const askedToRetry = (err: unknown): err is CliError => err instanceof CliError && err.status !== undefined && RETRIED_STATUSES.has(err.status);

/**
 * True when a read that failed with `err` is made again (the same count and waits as an answer
 * that asks to be): such an answer, or no answer at all (UnreachableError) once the API has
 * answered this command before (`reached`). A command whose first request reached no API ends at
 * once: a wrong URL or an API that is down is said without waiting.
 */
export const retriedRead = (err: unknown, reached: boolean): err is CliError => askedToRetry(err) || (reached && err instanceof UnreachableError);

/**
 * The wait before the `retried`-th read made again of a command that polls every `intervalMs`:
 * the longer of the interval and `leastMs` (MIN_RETRY_WAIT_MS unless configured), times the count.
 */
export const retryWaitMs = (intervalMs: number, retried: number, leastMs = MIN_RETRY_WAIT_MS): number => Math.max(intervalMs, leastMs) * retried;
