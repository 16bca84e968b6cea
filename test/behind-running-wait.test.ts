// How a job queued behind a running job of its connection and type waits between claims
// (behindRunningWaitSeconds, policy/job-lifecycle.ts): 5 s, doubling to a minute, each stretched by
// at most a fifth, and always above the local retry threshold its workflow's start runs under, so
// every wait is a durable timer.
import { describe, expect, it } from 'vitest';
import { BEHIND_RUNNING_FIRST_WAIT_SECONDS, behindRunningWaitSeconds } from '../policy/job-lifecycle';
import { LOCAL_JOB_START } from '../workflows/activity-options';

describe('the wait of a job queued behind a running one', () => {
  it('starts at 5 s and doubles up to a minute', () => {
    expect([1, 2, 3, 4, 5, 6, 20].map((claims) => behindRunningWaitSeconds(claims, 0))).toEqual([5, 10, 20, 40, 60, 60, 60]);
  });

  it('is stretched by less than a fifth', () => {
    expect([1, 5].map((claims) => behindRunningWaitSeconds(claims, 0.999999))).toEqual([6, 72]);
  });

  it('is longer than the local retry threshold of the job start that waits', () => {
    expect(LOCAL_JOB_START.localRetryThreshold).toBe('4 seconds');
    expect(behindRunningWaitSeconds(1, 0)).toBe(BEHIND_RUNNING_FIRST_WAIT_SECONDS);
    expect(BEHIND_RUNNING_FIRST_WAIT_SECONDS).toBeGreaterThan(4);
  });
});
