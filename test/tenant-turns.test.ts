// The turns of tenants at a process's pool (an API process's requests, a worker's statements;
// TenantTurns, a pure unit): a tenant holds at most its share, tenants already in flight leave
// the last place to a tenant with none, and a freed place goes to the waiting tenant with the
// fewest in flight, the earliest first.
import { describe, expect, it } from 'vitest';
import { TenantTurns } from '../lib/tenant-turns';

const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('TenantTurns (4 places, 2 a tenant)', () => {
  it('hands freed places to the waiting tenant with the fewest in flight, then to the earliest', async () => {
    const turns = new TenantTurns(4, 2);
    const started: string[] = [];
    const ends = new Map<string, () => void>();
    const take = (tenant: string, name: string) =>
      void turns.take(tenant).then((end) => {
        started.push(name);
        ends.set(name, end);
      });
    take('a', 'a1');
    take('a', 'a2');
    take('b', 'b1');
    take('b', 'b2'); // b has one in flight, and one place is left: it is kept for a tenant with none
    take('c', 'c1'); // c has none: it takes the last place
    take('a', 'a3'); // a has its two
    take('d', 'd1'); // no place is free
    await settled();
    expect(started).toEqual(['a1', 'a2', 'b1', 'c1']);

    ends.get('a1')!(); // one place: d has none in flight, b and a one each
    await settled();
    expect(started.slice(4)).toEqual(['d1']);

    ends.get('c1')!(); // one place, kept: every waiting tenant has one in flight
    await settled();
    expect(started.slice(5)).toEqual([]);

    ends.get('d1')!(); // two places: a and b have one each; b waited first
    await settled();
    expect(started.slice(5)).toEqual(['b2']);

    ends.get('b1')!(); // two places again: a's turn
    await settled();
    expect(started.slice(6)).toEqual(['a3']);
  });

  it('gives one tenant alone its share, never more, and its requests in the order they came', async () => {
    const turns = new TenantTurns(4, 2);
    const started: number[] = [];
    const ends: (() => void)[] = [];
    for (let n = 0; n < 5; n += 1) {
      void turns.take('a').then((end) => {
        started.push(n);
        ends[n] = end;
      });
    }
    await settled();
    expect(started).toEqual([0, 1]);
    ends[1]!();
    ends[0]!();
    await settled();
    expect(started).toEqual([0, 1, 2, 3]);
  });
});

describe('TenantTurns: a wait given up', () => {
  it('an aborted wait leaves the queue: the place it would have had goes to the next, and nothing is held for it', async () => {
    const turns = new TenantTurns(2, 1);
    const endA = await turns.take('a');
    const endB = await turns.take('b');
    const gaveUp = new AbortController();
    const waiting = turns.take('a', gaveUp.signal);
    const outcome = waiting.then(() => 'started', (err: unknown) => (err as Error).message);
    const startedC: string[] = [];
    void turns.take('c').then((end) => {
      startedC.push('c');
      end();
    });
    gaveUp.abort(new Error('gave up'));
    expect(await outcome).toBe('gave up');
    endA(); // a's place: c, the only one waiting now
    await new Promise((resolve) => setImmediate(resolve));
    expect(startedC).toEqual(['c']);
    endB();
    // Every place free again: a tenant's share is there at once.
    const again = await Promise.race([turns.take('a').then(() => 'taken'), new Promise((resolve) => setImmediate(() => resolve('waiting')))]);
    expect(again).toBe('taken');
  });
});
