// The API's background workflow starts: retried, never a rejection, drained on shutdown.
import { describe, expect, it } from 'vitest';
import { BackgroundStarts } from '../lib/background-starts';

describe('BackgroundStarts', () => {
  it('retries a failing start and reports it once every attempt failed, without rejecting', async () => {
    const failures: string[] = [];
    const starts = new BackgroundStarts((err, what) => failures.push(`${what}: ${(err as Error).message}`), 3, 1);
    let calls = 0;
    starts.run('job A', async () => {
      calls += 1;
      throw new Error('temporal unreachable');
    });
    await starts.drain();
    expect(calls).toBe(3);
    expect(failures).toEqual(['job A: temporal unreachable']);
  });

  it('stops retrying once a start succeeds, and drain waits for starts under way', async () => {
    const failures: unknown[] = [];
    const starts = new BackgroundStarts((err) => failures.push(err), 3, 1);
    let calls = 0;
    let done = false;
    starts.run('job B', async () => {
      calls += 1;
      if (calls === 1) throw new Error('blip');
      await new Promise((r) => setTimeout(r, 50));
      done = true;
    });
    await starts.drain();
    expect({ calls, done, failures }).toEqual({ calls: 2, done: true, failures: [] });
  });
});
