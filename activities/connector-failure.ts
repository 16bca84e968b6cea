import { ApplicationFailure } from '@temporalio/common';
import { ConnectorError, RateLimited } from '../connectors/types';

/**
 * Turns a connector error into an activity failure the job workflow's policy handles. Its type is
 * the error's kind and a rate limit carries the provider's hint in `details[0].retryAfterSeconds`.
 * Rate limits and permanent errors go straight to the workflow (which waits durably, or fails the
 * job); a transient error first gets the activity's few quick retries, which absorb blips, and
 * only then counts as a failed attempt of the job.
 */
export function toActivityFailure(err: unknown): unknown {
  if (!(err instanceof ConnectorError)) return err;
  return ApplicationFailure.create({
    message: err.message,
    type: err.kind,
    nonRetryable: err.kind !== 'transient',
    details: err instanceof RateLimited ? [{ retryAfterSeconds: err.retryAfterSeconds ?? null }] : [],
  });
}
