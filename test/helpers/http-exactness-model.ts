// A model of the `http` connector's data path that asks for exactness: once the provider is quiet
// and a full and an incremental pass have run, the stored records (live and tombstoned) and the
// records feed, as a consumer replays it page by page from the start of the scenario, equal the
// provider's items exactly. Shared by test/http-exactness-model.test.ts (a few runs per paging
// style in `npm test`) and the longer run of `npm run test:models`.
//
// What it adds to test/helpers/http-paging-model.ts, all things real providers and real jobs do:
//
// - the provider's changes include an item deleted and created again under its old id, an edit
//   of the item changed last within the same second (only its data changes), and an edit stamped
//   a second or two BEFORE the item's last change time (a provider whose servers' clocks differ);
// - the provider's clock is 2 hours behind ours and each change is visible as soon as it is
//   stamped, so its change times are believable and the cursors move to the newest change time
//   seen, never held back by the clock-skew margin (which would hide a skipped change);
// - besides a pass alone, a pass may overlap another job's pass of the same connection (a full
//   job beside the connection's incremental one or a backfill of a window: both activities run at
//   once, the second from the first's n-th page request, their page requests interleave, and one
//   page may be answered slowly, with the data as it was when asked, once one pass has ended), or
//   fail at one of its page requests (503) and be retried as the same task (attempt 2), which
//   resumes after its last stored page while the provider went on changing;
// - beside overlapping passes, an item churned: deleted before the step's first page request (a
//   full pass never lists it) and created again under its old id, with another item edited a
//   second later, just before the slow page request (a page the other job may fetch before the
//   full pass's deletion step and store after it);
// - a consumer reads the feed, in small pages from its own cursor, while the passes write and
//   after each step.
//
// Invariants: a full pass never tombstones an item the provider had, unchanged in position, for
// the whole pass (one deleted, created again or stamped backwards meanwhile is left out: a keyset
// listing may rightly miss it); once quiet, an incremental pass stores every item's latest data
// (but one whose latest version was stamped backwards, or behind a keyset position a running pass
// had passed in that same second: an incremental listing from a cursor past that time cannot serve
// it, and the clock-skew margin that would keep the cursor before it is out of this model's way);
// after a quiet full and incremental pass, store and feed are exact.
import fc from 'fast-check';
import { expect } from 'vitest';
import { MockActivityEnvironment } from '@temporalio/testing';
import { syncTask } from '../../activities/sync-task';
import type { ActivityDeps } from '../../activities/deps';
import { readChangesPage } from '../../db/models/records';
import type { Pool } from '../../db/pool';
import type { SyncTaskInput, SyncTaskResult } from '../../temporal/activities';
import { testActivityDeps } from './deps';
import { initialItems, itemsConfig, startFakeHttpProvider, type FakeHttpProvider, type FakeHttpStyle, type FakeItem } from './fake-http-provider';
import { createHttpConnection, runPass, storedRecords, type PassKind } from './http-sync';

export interface ExactnessVariant {
  style: FakeHttpStyle;
  keyset?: boolean;
  lookups?: boolean;
}

export const EXACTNESS_VARIANTS: ExactnessVariant[] = [
  { style: 'cursor' },
  { style: 'link' },
  { style: 'offset' },
  { style: 'page', keyset: true },
  { style: 'cursor', lookups: true },
];

export const exactnessVariantName = (v: ExactnessVariant) => `${v.style}${v.keyset ? ' by keyset' : ''}${v.lookups ? ', stable: false, with item lookups' : ''}`;

type OpKind = 'edit' | 'same-second' | 'backwards' | 'create' | 'delete' | 'recreate';
interface Op {
  kind: OpKind;
  /** Picks the item (modulo what there is). */
  pick: number;
  /** How far the provider's clock moves first (ms). */
  tick: 0 | 500 | 1000;
}
/** An op applied just before the `before`-th page request of the step is answered (or after the step, if it made fewer). */
interface Mutation {
  before: number;
  op: Op;
}
type Interleaving = 'alone' | 'overlap' | 'retry';
interface Step {
  kind: 'full' | 'incremental';
  how: Interleaving;
  /** For `overlap`: beside a full pass, the incremental one or a backfill (an incremental pass of a window); it starts once the first made `startAfter` page requests. */
  partner: 'other' | 'backfill';
  startAfter: number;
  /**
   * For `overlap`: the page request (of the step, counted after `startAfter`; 0: none) answered
   * slowly: its answer, made when asked, is sent only once one of the two passes has ended (a page
   * fetched before the other job's deletion step or cursor move, and stored after).
   */
  slowAt: number;
  /**
   * For `overlap`: an item churned under both passes: deleted before the step's first page request
   * is answered (so a full pass never lists it), created again under its old id just before the
   * slow request (or the first after `startAfter`) is answered, and another item edited a second
   * later (a newer change an incremental pass serving both moves its cursor to). The slow page may
   * then be fetched before the full pass's deletion step and stored after it.
   */
  churn: boolean;
  /** The backfill's window, in seconds from the first initial item's change time. */
  window: [number, number];
  /** For `retry`: the page request (of the step) answered 503; the retry runs after `between` more ops. */
  failAt: number;
  between: Op[];
  mutations: Mutation[];
  quiet: Op[];
}
interface Scenario {
  items: number;
  perSecond: number;
  size: number;
  steps: Step[];
}

const opArb: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom<OpKind>('edit', 'edit', 'same-second', 'backwards', 'create', 'delete', 'recreate'),
  pick: fc.nat(40),
  tick: fc.constantFrom<0 | 500 | 1000>(0, 500, 1000),
});

const scenarioArb: fc.Arbitrary<Scenario> = fc.record({
  items: fc.integer({ min: 2, max: 10 }),
  perSecond: fc.integer({ min: 1, max: 3 }),
  size: fc.integer({ min: 2, max: 3 }),
  steps: fc.array(
    fc.record({
      kind: fc.constantFrom<'full' | 'incremental'>('full', 'incremental'),
      how: fc.constantFrom<Interleaving>('alone', 'overlap', 'retry'),
      partner: fc.constantFrom<'other' | 'backfill'>('other', 'backfill'),
      startAfter: fc.integer({ min: 0, max: 4 }),
      slowAt: fc.integer({ min: 0, max: 4 }),
      churn: fc.boolean(),
      window: fc.tuple(fc.integer({ min: -2, max: 70 }), fc.integer({ min: 1, max: 40 })).map(([a, w]): [number, number] => [a, a + w]),
      failAt: fc.integer({ min: 1, max: 5 }),
      between: fc.array(opArb, { maxLength: 3 }),
      mutations: fc.array(fc.record({ before: fc.integer({ min: 1, max: 8 }), op: opArb }), { maxLength: 5 }),
      quiet: fc.array(opArb, { maxLength: 3 }),
    }),
    { minLength: 1, maxLength: 5 },
  ),
});

/** JSON with keys sorted (jsonb does not keep the provider's key order). */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v));

/** The provider: the fake, its clock, and what the model must know of each item's history. */
interface World {
  fake: FakeHttpProvider;
  clock: { ms: number };
  /** Ids ever created (re-creation takes one of these that is gone). */
  ever: Set<string>;
  /** Items whose current version was stamped before their previous one. */
  backwards: Set<string>;
  /**
   * Items whose current version was stamped, while passes ran, in the very second of a keyset
   * position an answer had already given and with an id not after it: behind the position, so the
   * pass cannot list it, and its cursor may move on to a newer change. Only the cursor's clock-skew
   * margin brings such a version to the next incremental pass, and this model's provider clock runs
   * too far behind for the margin (test/keyset-same-second.test.ts shows both sides); a full pass must.
   */
  passed: Set<string>;
  stats: ExactnessStats;
  /** Items deleted, created again or stamped backwards since the set was last cleared. */
  disturbed: Set<string>;
  log: string[];
}

/** Notes where `item`'s new version stands: behind a position a running pass was given, or not (see `World.passed`). */
function stamped(world: World, item: FakeItem): void {
  if (world.fake.positions.some((p) => p.at === item.updated_at && item.id <= p.id)) {
    world.passed.add(item.id);
    world.stats.behindPosition += 1;
    world.log.push(`   (${item.id} stamped behind a position given)`);
  } else world.passed.delete(item.id);
}

/** An incremental listing from a cursor past its version cannot serve it (see `World.backwards` and `World.passed`). */
const incrementalCannotServe = (world: World, id: string) => world.backwards.has(id) || world.passed.has(id);

function apply(world: World, op: Op): void {
  const { fake, clock } = world;
  clock.ms += op.tick;
  const ids = [...fake.items.keys()].sort();
  const some = (list: string[]) => list[op.pick % list.length]!;
  const note = (what: string) => world.log.push(`${what} (clock ${new Date(clock.ms).toISOString()}, request ${fake.requests})`);
  switch (op.kind) {
    case 'create': {
      const item = fake.create();
      world.ever.add(item.id);
      stamped(world, item);
      note(`create ${item.id} at ${item.updated_at}`);
      return;
    }
    case 'recreate': {
      const gone = [...world.ever].filter((id) => !fake.items.has(id)).sort();
      if (gone.length === 0) return;
      const id = some(gone);
      const item = fake.create(undefined, id);
      world.backwards.delete(id);
      stamped(world, item);
      world.disturbed.add(id);
      note(`recreate ${id} at ${item.updated_at}`);
      return;
    }
    case 'delete': {
      if (ids.length === 0) return;
      const id = some(ids);
      fake.remove(id);
      world.backwards.delete(id);
      world.passed.delete(id);
      world.disturbed.add(id);
      note(`delete ${id}`);
      return;
    }
    case 'edit':
    case 'same-second': {
      if (ids.length === 0) return;
      // Same second: the item changed last, edited again before the provider's clock moves on
      // (only its data changes). Stamping an older item with its own old second would be an
      // edit stamped behind the provider's clock: that is what 'backwards' does, on purpose.
      if (op.kind === 'same-second') clock.ms -= op.tick;
      const id = op.kind === 'edit' ? some(ids) : fake.list().at(-1)!.id;
      const old = fake.items.get(id)!;
      const item = fake.edit(id);
      if (Date.parse(item.updated_at) > Date.parse(old.updated_at)) world.backwards.delete(id);
      stamped(world, item);
      note(`${op.kind} ${id} at ${item.updated_at} (was ${old.updated_at})`);
      return;
    }
    case 'backwards': {
      if (ids.length === 0) return;
      const id = some(ids);
      const old = fake.items.get(id)!;
      const item = fake.edit(id, Date.parse(old.updated_at) - (op.tick === 0 ? 1000 : 2000));
      world.backwards.add(id);
      world.passed.delete(id);
      world.disturbed.add(id);
      note(`backwards ${id} at ${item.updated_at} (was ${old.updated_at})`);
    }
  }
}

/** A consumer of the records feed: its cursor and its copy (external id → data; deletions remove). */
interface Consumer {
  seq: string;
  copy: Map<string, unknown>;
}

/** Reads the feed on from the consumer's cursor, three changes a page, to its end. */
async function consume(pool: Pool, connectionId: string, consumer: Consumer): Promise<void> {
  for (;;) {
    const { changes } = await readChangesPage(pool, { connectionId, afterSeq: consumer.seq, limit: 3 });
    if (changes.length === 0) return;
    for (const change of changes) {
      if (change.change === 'delete') consumer.copy.delete(change.external_id);
      else consumer.copy.set(change.external_id, change.data);
      consumer.seq = change.change_seq;
    }
  }
}

/** Reads the feed on in the background, as a consumer polling while syncs write, until `stop()`. */
function consumeWhile(pool: Pool, connectionId: string, consumer: Consumer): { stop(): Promise<void> } {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await consume(pool, connectionId, consumer);
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

/** A pass whose attempt 1 fails (the provider's 503) and whose attempt 2 runs the same task after `between`. */
async function failedThenRetried(deps: ActivityDeps, connectionId: string, kind: PassKind, between: () => void): Promise<void> {
  const { rows } = await deps.pool.query<{ id: string }>(
    `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, started_at)
     select $1, tenant_id, $2, 'manual', 'running', now() from connections where id = $1 returning id`,
    [connectionId, kind],
  );
  const jobId = rows[0]!.id;
  const task = await deps.pool.query<{ id: string }>(`insert into sync_tasks (job_id, resource_type) values ($1, 'items') returning id`, [jobId]);
  const input: SyncTaskInput = { jobId, taskId: task.rows[0]!.id, resourceType: 'items', mode: kind === 'full' ? 'full' : 'incremental' };
  try {
    let failed = false;
    try {
      await new MockActivityEnvironment({ attempt: 1 }).run(syncTask(deps), input);
    } catch {
      failed = true;
    }
    between();
    const result = (await new MockActivityEnvironment({ attempt: failed ? 2 : 1 }).run(syncTask(deps), input)) as SyncTaskResult;
    expect(result.status, `retried ${kind} pass`).toBe('completed');
  } finally {
    await deps.pool.query(`update sync_jobs set status = 'completed', finished_at = now() where id = $1`, [jobId]);
  }
}

const LISTING_KEPT_CHANGING = /the listing changed during each of \d+ reads/;

/** What the runs exercised, printed after them (a property that never reached a case proves nothing of it). */
export interface ExactnessStats {
  runs: number;
  steps: Record<string, number>;
  /** Retried steps whose first attempt did fail at its page (the others made fewer requests). */
  retried: number;
  slowAnswers: number;
  /** Items churned (deleted before an overlap step, created again in it): see `Step.churn`. */
  churned: number;
  /** Passes that failed as the listing kept changing (a job would retry them). */
  listingKeptChanging: number;
  /** Versions stamped behind a keyset position a running pass was given (see `World.passed`). */
  behindPosition: number;
}

async function runScenario(pool: Pool, variant: ExactnessVariant, scenario: Scenario, label: string, stats: ExactnessStats): Promise<void> {
  // Two hours behind our clock: the provider's change times are believable, and every pass starts
  // long after them (the cursor takes the newest change time seen, not the clock-skew cap).
  const clock = { ms: Date.now() - 2 * 3_600_000 };
  const initial = initialItems(scenario.items, clock.ms - 60_000, scenario.perSecond);
  const fake = await startFakeHttpProvider({ size: scenario.size, initial, clock: () => clock.ms });
  const world: World = { fake, clock, ever: new Set(initial.map((i) => i.id)), backwards: new Set(), passed: new Set(), stats, disturbed: new Set(), log: [] };
  const consumer: Consumer = { seq: '0', copy: new Map() };
  try {
    const connectionId = await createHttpConnection(pool, itemsConfig(fake.baseUrl, variant, scenario.size), label);
    const { deps } = testActivityDeps({ pool });
    const pass = (kind: PassKind, window?: { start: Date; end: Date }) =>
      runPass(deps, connectionId, 'items', kind, window).then(({ result }) => expect(result.status, `${kind} pass`).toBe('completed'));
    const firstChange = Date.parse(initial[0]!.updated_at);

    for (const [index, step] of scenario.steps.entries()) {
      const pending = [...step.mutations].sort((a, b) => a.before - b.before);
      const first = fake.requests;
      // The overlapping partner starts once the first pass made `startAfter` page requests (or ended).
      let startPartner = () => {};
      const partnerGate = new Promise<void>((resolve) => {
        startPartner = resolve;
      });
      if (step.startAfter === 0) startPartner();
      // A slow answer waits for one pass to end; asked once the partner started, so the other pass is running or done.
      let oneEnded = () => {};
      const ended = new Promise<void>((resolve) => {
        oneEnded = resolve;
      });
      fake.holdResponse = () => {
        if (step.how !== 'overlap' || step.slowAt === 0 || fake.requests - first !== step.startAfter + step.slowAt) return null;
        world.log.push(`   request ${fake.requests} answered slowly`);
        stats.slowAnswers += 1;
        return ended;
      };
      let churned: string | null = null;
      const churn = () => {
        if (step.how !== 'overlap' || !step.churn) return;
        const n = fake.requests - first;
        const ids = [...fake.items.keys()].sort();
        if (n === 1 && ids.length > 1) {
          churned = ids[step.startAfter % ids.length]!;
          fake.remove(churned);
          world.disturbed.add(churned);
          world.backwards.delete(churned);
          world.passed.delete(churned);
          world.log.push(`churn: delete ${churned} (request ${fake.requests})`);
        } else if (churned !== null && n === step.startAfter + Math.max(step.slowAt, 1) && !fake.items.has(churned)) {
          const item = fake.create(undefined, churned);
          stamped(world, item);
          stats.churned += 1;
          world.log.push(`churn: recreate ${churned} at ${item.updated_at} (request ${fake.requests})`);
          clock.ms += 1000;
          const other = [...fake.items.keys()].sort().find((id) => id !== churned);
          if (other !== undefined) {
            const was = fake.items.get(other)!;
            const edited = fake.edit(other);
            if (Date.parse(edited.updated_at) > Date.parse(was.updated_at)) world.backwards.delete(other);
            stamped(world, edited);
            world.log.push(`churn: edit ${other} at ${edited.updated_at} (was ${was.updated_at})`);
          }
        }
      };
      fake.beforeRequest = (url) => {
        // FC_DEBUG=1: every request of the step in the failure's log.
        if (process.env.FC_DEBUG) world.log.push(`   [req ${fake.requests} ${url.pathname}${url.search} t=${new Date().toISOString()}]`);
        churn();
        if (fake.requests - first >= step.startAfter) startPartner();
        while (pending.length > 0 && pending[0]!.before <= fake.requests - first) apply(world, pending.shift()!.op);
      };
      let failed = false;
      fake.failRequest = () => {
        if (step.how !== 'retry' || failed || fake.requests - first < step.failAt) return false;
        failed = true;
        world.log.push(`503 at request ${fake.requests}`);
        stats.retried += 1;
        return true;
      };
      const present = new Set(fake.items.keys());
      world.disturbed.clear();
      // Positions given before this step's passes belong to passes that ended.
      fake.positions = [];
      world.log.push(`-- step ${index + 1}: ${step.how} ${step.kind}`);
      const name = `${step.how} ${step.kind}${step.how === 'overlap' && step.kind === 'full' && step.partner === 'backfill' ? ' + backfill' : ''}`;
      stats.steps[name] = (stats.steps[name] ?? 0) + 1;
      const reader = consumeWhile(pool, connectionId, consumer);
      try {
        if (step.how === 'alone') await pass(step.kind);
        else if (step.how === 'overlap') {
          // One job of each type at a time: beside an incremental pass only a full one; beside a full one an incremental pass or a backfill.
          const backfill = step.kind === 'full' && step.partner === 'backfill';
          const window = { start: new Date(firstChange + step.window[0] * 1000), end: new Date(firstChange + step.window[1] * 1000) };
          world.log.push(`   beside it after ${step.startAfter} requests: ${backfill ? `backfill [${window.start.toISOString()}, ${window.end.toISOString()})` : step.kind === 'full' ? 'incremental' : 'full'}`);
          const firstPass = pass(step.kind).finally(() => {
            startPartner();
            oneEnded();
          });
          const partner = partnerGate.then(() => (backfill ? pass('backfill', window) : pass(step.kind === 'full' ? 'incremental' : 'full'))).finally(oneEnded);
          // Both end before the step does, whatever either does.
          const failed = (await Promise.allSettled([firstPass, partner])).find((r) => r.status === 'rejected');
          if (failed) throw failed.reason;
        }
        else await failedThenRetried(deps, connectionId, step.kind, () => step.between.forEach((op) => apply(world, op)));
      } catch (err) {
        // A listing paged by position that never held still: the job would retry it later.
        if (!LISTING_KEPT_CHANGING.test(String(err))) throw err;
        world.log.push('(a pass failed: the listing kept changing)');
        stats.listingKeptChanging += 1;
      } finally {
        fake.beforeRequest = null;
        fake.failRequest = null;
        fake.holdResponse = null;
        // The step's passes ended: a change from here on is listed by the next pass.
        fake.positions = [];
        await reader.stop();
      }
      if (step.kind === 'full' || step.how === 'overlap') {
        const stored = await storedRecords(pool, connectionId, 'items');
        const wrong = [...present].filter((id) => !world.disturbed.has(id) && stored.get(id)?.deleted_at !== null);
        expect(wrong, `${label}: step ${index + 1} (${step.how} ${step.kind}): tombstoned or missed items the provider had for the whole pass\n${world.log.join('\n')}`).toEqual([]);
      }
      for (const rest of pending) apply(world, rest.op);
      await consume(pool, connectionId, consumer);
      for (const op of step.quiet) apply(world, op);
    }

    // Quiet from here on. One incremental pass brings every change but versions stamped backwards.
    world.log.push('-- quiet incremental');
    await pass('incremental');
    let stored = await storedRecords(pool, connectionId, 'items');
    // FC_DEBUG=1: the stored rows, the cursors and the provider's items go into the failure's log.
    if (process.env.FC_DEBUG) {
      world.log.push(JSON.stringify((await pool.query(`select external_id, source_updated_at, deleted_at, synced_at, fetched_at, change_seq, data from records where connection_id = $1 order by change_seq`, [connectionId])).rows));
      world.log.push(JSON.stringify((await pool.query(`select partition, cursor from sync_state where connection_id = $1`, [connectionId])).rows));
      world.log.push(JSON.stringify(fake.list()));
    }
    const stale = fake.list().filter((item) => !incrementalCannotServe(world, item.id) && (stored.get(item.id)?.deleted_at !== null || canonical(stored.get(item.id)?.data) !== canonical(item)));
    expect(stale.map((i) => i.id), `${label}: after a quiet incremental pass, items not stored with their latest data\n${world.log.join('\n')}`).toEqual([]);

    // A full pass and an incremental one: exactly the provider's items live, every other record a tombstone.
    world.log.push('-- quiet full, incremental');
    await pass('full');
    await pass('incremental');
    stored = await storedRecords(pool, connectionId, 'items');
    const truth = new Map<string, FakeItem>(fake.list().map((i) => [i.id, i]));
    const live = new Map([...stored].filter(([, r]) => r.deleted_at === null).map(([id, r]) => [id, canonical(r.data)]));
    expect(live, `${label}: live records after a quiet full and incremental pass\n${world.log.join('\n')}`).toEqual(new Map([...truth].map(([id, i]) => [id, canonical(i)])));
    await consume(pool, connectionId, consumer);
    const copy = new Map([...consumer.copy].map(([id, data]) => [id, canonical(data)]));
    expect(copy, `${label}: the feed as a consumer replayed it`).toEqual(live);
  } finally {
    await fake.close();
  }
}

let labels = 0;

/**
 * Checks the model for `variant` over `numRuns` random scenarios with fast-check's configured seed
 * (fixed in CI by test/setup-fast-check.ts; FC_SEED overrides, FC_PATH replays one failing run, FC_SHRINK=1
 * shrinks a failure), printing it first.
 */
export async function checkHttpExactnessModel(pool: Pool, variant: ExactnessVariant, numRuns: number): Promise<ExactnessStats> {
  const seed = Number(process.env.FC_SEED ?? fc.readConfigureGlobal().seed ?? Math.floor(Math.random() * 2 ** 31));
  console.log(`http exactness model, ${exactnessVariantName(variant)}: seed ${seed} (FC_SEED=${seed} replays), ${numRuns} runs`);
  const stats: ExactnessStats = { runs: 0, steps: {}, retried: 0, slowAnswers: 0, churned: 0, listingKeptChanging: 0, behindPosition: 0 };
  await fc.assert(
    fc.asyncProperty(scenarioArb, async (scenario) => {
      stats.runs += 1;
      labels += 1;
      await runScenario(pool, variant, scenario, `exact-${variant.style}${variant.keyset ? '-keyset' : ''}${variant.lookups ? '-lookups' : ''}-${labels}`, stats);
    }),
    // FC_SHRINK=1 shrinks a failure (slower) instead of reporting the first counterexample found.
    { numRuns, seed, endOnFailure: process.env.FC_SHRINK !== '1', ...(process.env.FC_PATH && { path: process.env.FC_PATH }) },
  );
  console.log(`http exactness model, ${exactnessVariantName(variant)}: ${JSON.stringify(stats)}`);
  return stats;
}
