import type { ActivityOptions, LocalActivityOptions } from '@temporalio/workflow';

/**
 * Bookkeeping activities are short transactions. They retry without limit (a Postgres outage must
 * delay work, never lose it), backing off to one attempt a minute.
 */
export const BOOKKEEPING: ActivityOptions = {
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
};

/**
 * Bookkeeping as local activities: run by the worker that holds the workflow task, recorded as a
 * marker, so consecutive ones cost no extra task. Same retries as BOOKKEEPING; a retry whose
 * backoff is longer than the local retry threshold (1 minute) becomes a durable timer.
 */
export const LOCAL_BOOKKEEPING: LocalActivityOptions = {
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
};
