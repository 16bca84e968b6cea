import { ApplicationFailure } from '@temporalio/common';
import { redactSecrets } from '../connectors/provider-http';
import { ConnectorError, RateLimited } from '../connectors/types';
import { DEFAULT_MAX_RESET_SECONDS } from '../policy/rate-budget';

/** `err` (and its causes) with every value of `secrets` redacted from message and stack; `err` itself when none appears. */
function redacted(err: unknown, secrets: readonly string[], depth = 0): unknown {
  if (!(err instanceof Error) || secrets.length === 0 || depth > 5) return err;
  const message = redactSecrets(err.message, secrets);
  if (message !== err.message) err.message = message;
  if (err.stack !== undefined) {
    const stack = redactSecrets(err.stack, secrets);
    if (stack !== err.stack) err.stack = stack;
  }
  if (err.cause !== undefined) redacted(err.cause, secrets, depth + 1);
  return err;
}

/**
 * Turns a connector error into an activity failure the job workflow's policy handles. Its type is
 * the error's kind and a rate limit carries the provider's hint in `details[0].retryAfterSeconds`.
 * Rate limits and permanent errors go straight to the workflow (which waits durably, or fails the
 * job); a transient error first gets the activity's few quick retries, which absorb blips, and
 * only then counts as a failed attempt of the job.
 *
 * The one place every error of a provider call leaves an activity: its message (and stack) is
 * redacted here with `secrets`, the connection's credential values (`credentialSecrets`), whatever
 * the connector put into it (a URL a provider echoed the secret into, say). From here a message
 * goes to the job and task rows, job logs, alerts, webhook events, the Temporal history and the
 * log, so none of them can hold a credential.
 *
 * A rate limit's wait (the provider's `Retry-After` or stated reset) is believed up to
 * `maxWaitSeconds` (RATE_BUDGET_MAX_RESET_SECONDS): a longer one is cut to it, and the message says so.
 */
export function toActivityFailure(err: unknown, secrets: readonly string[] = [], maxWaitSeconds: number = DEFAULT_MAX_RESET_SECONDS): unknown {
  if (!(err instanceof ConnectorError)) return redacted(err, secrets);
  let message = redactSecrets(err.message, secrets);
  let retryAfterSeconds = err instanceof RateLimited ? (err.retryAfterSeconds ?? null) : null;
  if (retryAfterSeconds !== null && retryAfterSeconds > maxWaitSeconds) {
    message += ` (the provider asked to wait ${retryAfterSeconds} s, more than RATE_BUDGET_MAX_RESET_SECONDS = ${maxWaitSeconds} s: capped)`;
    retryAfterSeconds = maxWaitSeconds;
  }
  return ApplicationFailure.create({
    message,
    type: err.kind,
    nonRetryable: err.kind !== 'transient',
    details: err instanceof RateLimited ? [{ retryAfterSeconds }] : [],
  });
}
