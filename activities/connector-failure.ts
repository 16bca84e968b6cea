import { ApplicationFailure } from '@temporalio/common';
import { ConnectorError } from '../connectors/types';

/**
 * Turns a connector error into the activity failure Temporal understands: permanent errors never
 * retry; rate limits and transient errors do (the failure-policy work tunes their delays). The
 * failure type is the error's kind, so workflows can tell them apart.
 */
export function toActivityFailure(err: unknown): unknown {
  if (!(err instanceof ConnectorError)) return err;
  return ApplicationFailure.create({
    message: err.message,
    type: err.kind,
    nonRetryable: err.kind === 'permanent',
  });
}
