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

/**
 * LOCAL_BOOKKEEPING for a job's start (claim and preparation) whose claim may wait behind a running
 * job of its connection and type in steps from BEHIND_RUNNING_FIRST_WAIT_SECONDS (5 s, in
 * policy/job-lifecycle.ts): a local retry threshold below the first step, so every such wait (and
 * a retry's backoff past it) is a durable timer, holding no workflow task or worker slot meanwhile.
 */
export const LOCAL_JOB_START: LocalActivityOptions = {
  ...LOCAL_BOOKKEEPING,
  // A literal: it decides which retries are timers in a run's history, so it never changes with
  // the policy's constant (a test keeps it below that constant).
  localRetryThreshold: '4 seconds',
};
