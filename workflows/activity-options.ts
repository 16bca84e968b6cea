import type { ActivityOptions } from '@temporalio/workflow';

/**
 * Bookkeeping activities are short transactions. They retry without limit (a Postgres outage must
 * delay work, never lose it), backing off to one attempt a minute.
 */
export const BOOKKEEPING: ActivityOptions = {
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
};
