import type { ApiErrorCode } from '../policy/vocabulary';

/** Why a command refused: the caller maps it to its own answer (HTTP status, exit code). */
export type Refusal = 'invalid' | 'not_found' | 'conflict' | 'gone' | 'failed' | 'timeout' | 'limited';

/** A command that could not be carried out, with a stable code and a message fit for a user. */
export class CommandRefused extends Error {
  override name = 'CommandRefused';
  constructor(
    readonly reason: Refusal,
    readonly code: ApiErrorCode,
    message: string,
    /** Extra fields for the answer (e.g. the alert of a connection paused by its breaker). */
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** A refusal because the request itself is wrong (`invalid_request`). */
export function invalid(message: string): CommandRefused {
  return new CommandRefused('invalid', 'invalid_request', message);
}

/** A refusal because the resource does not exist. */
export function notFound(message: string): CommandRefused {
  return new CommandRefused('not_found', 'not_found', message);
}

/** The first line of an error text, at most 500 characters: no stack or statement rides along. */
export function firstLine(text: string): string {
  const line = text.split('\n', 1)[0]!.trim();
  return line.length > 500 ? `${line.slice(0, 497)}...` : line;
}
