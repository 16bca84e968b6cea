// A request's turn as holdTurn gives it (api/middleware/tenant-turns.ts): whatever happens around a
// wait outside the turn (the wait fails, the turn is ended during it or while it is taken again,
// the first wait is abandoned), every turn taken is given back once, and the tenant's next
// request gets its turn. Real TenantTurns, no database.
import { describe, expect, it } from 'vitest';
import { holdTurn } from '../api/middleware/tenant-turns';
import { TenantTurns } from '../lib/tenant-turns';

const tick = () => new Promise((resolve) => setTimeout(resolve, 10));

/** Whether `tenant` gets a turn now (given back at once; a wait for one is abandoned). */
async function turnFree(turns: TenantTurns, tenant: string): Promise<boolean> {
  let got = false;
  const stop = new AbortController();
  const taking = turns.take(tenant, stop.signal).then(
    (done) => {
      got = true;
      return done;
    },
    () => null,
  );
  await tick();
  if (got) (await taking)!();
  else {
    stop.abort(new Error('checked'));
    await taking;
  }
  return got;
}

/** Turns in flight at `turns`, all tenants together. */
const inFlight = (turns: TenantTurns) => (turns as unknown as { running: number }).running;

describe('holdTurn', () => {
  it('gives the turn back when it is ended during the wait outside it', async () => {
    const turns = new TenantTurns(4, 1);
    const held = await holdTurn(turns, 't');
    let release!: () => void;
    const waiting = held.outsideTurn(() => new Promise<void>((resolve) => (release = resolve)));
    await tick();
    held.end();
    release();
    await waiting;
    expect(inFlight(turns)).toBe(0);
    expect(await turnFree(turns, 't')).toBe(true);
  });

  it('takes the turn again after a wait that fails, and gives it back once when ended', async () => {
    const turns = new TenantTurns(4, 1);
    const held = await holdTurn(turns, 't');
    await expect(held.outsideTurn(() => Promise.reject(new Error('exchange failed')))).rejects.toThrow('exchange failed');
    expect(await turnFree(turns, 't')).toBe(false);
    held.end();
    held.end();
    expect(inFlight(turns)).toBe(0);
    expect(await turnFree(turns, 't')).toBe(true);
  });

  it('gives the turn back when it is ended while it is being taken again', async () => {
    const turns = new TenantTurns(4, 1);
    const held = await holdTurn(turns, 't');
    let release!: () => void;
    const waiting = held.outsideTurn(() => new Promise<void>((resolve) => (release = resolve)));
    // Another request of the tenant takes the turn meanwhile: the wait's end queues behind it.
    const other = await turns.take('t');
    release();
    await tick();
    held.end();
    other();
    await waiting;
    expect(inFlight(turns)).toBe(0);
    expect(await turnFree(turns, 't')).toBe(true);
  });

  it('holds nothing for a first wait abandoned before the turn came', async () => {
    const turns = new TenantTurns(2, 1);
    const first = await holdTurn(turns, 't');
    const stop = new AbortController();
    const second = holdTurn(turns, 't', stop.signal);
    stop.abort(new Error('client gone'));
    await expect(second).rejects.toThrow('client gone');
    first.end();
    expect(inFlight(turns)).toBe(0);
  });
});
