// The model of the `http` connector's sync under change, shared by test/http-paging-model.test.ts
// (a few runs per paging style in `npm test`) and the longer run of `npm run test:models`. A fake provider
// (test/helpers/fake-http-provider.ts, listing by change time ascending, or newest first for some
// variants) changes its items at random between page requests (edits,
// creations, deletions, change times in whole seconds from the wall clock) while a random sequence
// of full, incremental and backfill passes runs the sync activity against real Postgres. The
// provider's `since` is inclusive or exclusive at random (a scenario's). Invariants:
//
// - a full pass never tombstones an item that the provider had for the whole pass (and stores it);
// - once the provider is quiet, one incremental pass stores every item's latest data (no change
//   was skipped for good by an earlier pass), and nothing the provider has is tombstoned;
// - a quiet full pass then leaves exactly the provider's items live (ids and data).
//
// The provider's clock is the model's own timeline (it runs ahead of the wall clock): each change
// moves it on by 0, ½ or 1 s, passes may start 90 s later than the last change (older than the
// cursors' clock-skew margin, so the margin cannot hide a skipped change), and every pass starts at
// its time (the task's `started_at`), as it would against a provider whose clock agrees with ours.
//
// A pass may fail with the connector's "listing changed during each of … reads" (a listing paged
// by position, or the head of a newest-first one, that never held still): the job would retry it;
// the model counts it and goes on.
import fc from 'fast-check';
import { expect } from 'vitest';
import type { Pool } from '../../db/pool';
import { testActivityDeps } from './deps';
import { initialItems, itemsConfig, startFakeHttpProvider, type FakeHttpProvider, type FakeHttpStyle } from './fake-http-provider';
import { createHttpConnection, runPass, storedRecords, type PassKind } from './http-sync';
import { mulberry32 } from './random';

/**
 * A paging style; for page numbers and offsets whether the resource declares change-time order
 * (keyset); whether the listing is declared not consistent (`stable: false`) with deletions
 * confirmed by item lookups instead; and whether the provider lists newest first (an item changed
 * mid-pass moves to the head, behind the position of a keyset link or cursor).
 */
export interface ModelVariant {
  style: FakeHttpStyle;
  keyset: boolean;
  lookups?: boolean;
  newestFirst?: boolean;
}

export const MODEL_VARIANTS: ModelVariant[] = [
  { style: 'none', keyset: false },
  { style: 'link', keyset: false },
  { style: 'next', keyset: false },
  { style: 'cursor', keyset: false },
  { style: 'page', keyset: false },
  { style: 'offset', keyset: false },
  { style: 'page', keyset: true },
  { style: 'offset', keyset: true },
  { style: 'cursor', keyset: false, lookups: true },
  { style: 'link', keyset: false, newestFirst: true },
  { style: 'cursor', keyset: false, newestFirst: true },
];

export const variantName = (v: ModelVariant) =>
  `${v.style}${v.keyset ? ' by keyset' : ''}${v.lookups ? ', stable: false, with item lookups' : ''}${v.newestFirst ? ', newest first' : ''}`;

interface PassPlan {
  kind: PassKind;
  /** Seeds the changes made between this pass's page requests. */
  seed: number;
  /** Chance (in 1/100) that changes happen before a page request. */
  rate: number;
  /** Changes made between the previous pass and this one. */
  quietChanges: number;
  /** Whether the pass starts 90 s after the last change (else at once). */
  later: boolean;
  /** A backfill's window, as offsets in seconds from the first item's change time. */
  window: [number, number];
}

interface Scenario {
  /** Whether the provider's `since` leaves out the items changed at that very time. */
  exclusiveSince: boolean;
  items: number;
  perSecond: number;
  size: number;
  passes: PassPlan[];
}

const scenarioArb: fc.Arbitrary<Scenario> = fc.record({
  exclusiveSince: fc.boolean(),
  items: fc.integer({ min: 3, max: 14 }),
  perSecond: fc.integer({ min: 1, max: 4 }),
  size: fc.integer({ min: 2, max: 4 }),
  passes: fc.array(
    fc.record({
      kind: fc.constantFrom<PassKind>('full', 'incremental', 'backfill'),
      seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
      rate: fc.integer({ min: 0, max: 60 }),
      quietChanges: fc.integer({ min: 0, max: 3 }),
      later: fc.boolean(),
      window: fc.tuple(fc.integer({ min: -2, max: 12 }), fc.integer({ min: 0, max: 8 })).map(([a, w]): [number, number] => [a, a + w]),
    }),
    { minLength: 1, maxLength: 5 },
  ),
});

/** The model's clock (ms), read by the fake provider. */
interface Clock {
  ms: number;
}

/** One random change, 0 to 1 s after the last: an edit (half), a creation or a deletion. */
function change(fake: FakeHttpProvider, clock: Clock, random: () => number, deletedDuring?: Set<string>) {
  clock.ms += [0, 500, 1000][Math.floor(random() * 3)]!;
  const ids = [...fake.items.keys()];
  const roll = random();
  if (ids.length === 0 || roll < 0.25) {
    fake.create();
  } else if (roll < 0.75) {
    fake.edit(ids[Math.floor(random() * ids.length)]!);
  } else {
    const id = ids[Math.floor(random() * ids.length)]!;
    fake.remove(id);
    deletedDuring?.add(id);
  }
}

const LISTING_KEPT_CHANGING = /the listing changed during each of \d+ reads/;

/** Runs one scenario for a variant against a new connection; throws (expect) when an invariant breaks. */
async function runScenario(pool: Pool, variant: ModelVariant, scenario: Scenario, label: string, stats: ModelStats): Promise<void> {
  // Ahead of the wall clock: records written by earlier passes were synced before any later pass start.
  const clock: Clock = { ms: Date.now() + 3_600_000 };
  const hourAgo = clock.ms - 3_600_000;
  const fake = await startFakeHttpProvider({
    size: scenario.size, initial: initialItems(scenario.items, hourAgo, scenario.perSecond), clock: () => clock.ms, newestFirst: variant.newestFirst ?? false,
  });
  fake.sinceExclusive = scenario.exclusiveSince;
  const passStart = () => new Date(clock.ms);
  try {
    const connectionId = await createHttpConnection(pool, itemsConfig(fake.baseUrl, variant, scenario.size), label);
    const { deps } = testActivityDeps({ pool });
    const firstChange = Math.floor(hourAgo / 1000) * 1000;

    for (const [index, plan] of scenario.passes.entries()) {
      const random = mulberry32(plan.seed);
      for (let k = 0; k < plan.quietChanges; k += 1) change(fake, clock, random);
      if (plan.later) clock.ms += 90_000;
      const presentAtStart = new Set(fake.items.keys());
      const deletedDuring = new Set<string>();
      fake.beforeRequest = () => {
        if (random() * 100 < plan.rate) for (let k = 1 + Math.floor(random() * 2); k > 0; k -= 1) change(fake, clock, random, deletedDuring);
      };
      const window = plan.kind === 'backfill' ? { start: new Date(firstChange + plan.window[0] * 1000), end: new Date(firstChange + plan.window[1] * 1000) } : undefined;
      try {
        await runPass(deps, connectionId, 'items', plan.kind, window, passStart());
        stats.passes += 1;
      } catch (err) {
        if (!LISTING_KEPT_CHANGING.test(String((err as Error).message))) throw err;
        stats.failedPasses += 1;
        continue;
      } finally {
        fake.beforeRequest = null;
      }
      if (plan.kind === 'full') {
        const stored = await storedRecords(pool, connectionId, 'items');
        const wronglyGone = [...presentAtStart].filter((id) => !deletedDuring.has(id) && stored.get(id)?.deleted_at !== null);
        expect(wronglyGone, `${label}: pass ${index + 1} (full) tombstoned or missed items the provider had for the whole pass`).toEqual([]);
      }
    }

    // Quiet from here on (and past the clock-skew margin). One incremental pass brings every change.
    clock.ms += 120_000;
    await runPass(deps, connectionId, 'items', 'incremental', undefined, passStart());
    let stored = await storedRecords(pool, connectionId, 'items');
    const stale = fake.list().filter((item) => stored.get(item.id)?.deleted_at !== null || JSON.stringify(stored.get(item.id)?.data) !== JSON.stringify(item));
    expect(stale.map((i) => i.id), `${label}: after a quiet incremental pass, items not stored with their latest data`).toEqual([]);
    // And a full pass leaves exactly the provider's items live.
    await runPass(deps, connectionId, 'items', 'full', undefined, passStart());
    stored = await storedRecords(pool, connectionId, 'items');
    const live = [...stored.values()].filter((r) => r.deleted_at === null);
    expect(live.map((r) => r.external_id).sort(), `${label}: live records after a quiet full pass`).toEqual([...fake.items.keys()].sort());
    for (const record of live) expect(record.data, `${label}: data of ${record.external_id}`).toEqual(fake.items.get(record.external_id));
  } finally {
    await fake.close();
  }
}

export interface ModelStats {
  runs: number;
  passes: number;
  failedPasses: number;
}

let labels = 0;

/**
 * Checks the model for `variant` over `numRuns` random scenarios with fast-check's configured seed
 * (fixed in CI by test/setup-fast-check.ts; FC_SEED overrides), printing the seed first.
 */
export async function checkHttpPagingModel(pool: Pool, variant: ModelVariant, numRuns: number): Promise<ModelStats> {
  const seed = fc.readConfigureGlobal().seed ?? Math.floor(Math.random() * 2 ** 31);
  console.log(`http paging model, ${variantName(variant)}: seed ${seed} (FC_SEED=${seed} replays), ${numRuns} runs`);
  const stats: ModelStats = { runs: 0, passes: 0, failedPasses: 0 };
  await fc.assert(
    fc.asyncProperty(scenarioArb, async (scenario) => {
      stats.runs += 1;
      labels += 1;
      await runScenario(pool, variant, scenario, `model-${variant.style}${variant.keyset ? '-keyset' : ''}${variant.lookups ? '-lookups' : ''}${variant.newestFirst ? '-newest' : ''}${scenario.exclusiveSince ? '-exclusive' : ''}-${labels}`, stats);
    }),
    { numRuns, seed, endOnFailure: true },
  );
  console.log(`http paging model, ${variantName(variant)}: ${stats.runs} runs, ${stats.passes} passes completed, ${stats.failedPasses} failed as the listing kept changing`);
  return stats;
}
