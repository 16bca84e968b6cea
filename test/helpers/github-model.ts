// A model-based test of the GitHub data path: random histories of a fake GitHub whose issues and
// pull requests are edited, created, deleted (issues), transferred to another repository (issues)
// and hidden (as GitHub hides a spam account's items: every later one moves up a position) BETWEEN
// the page requests of a pass, with whole-second timestamps (many ties), small pages, 3
// configured repositories and 2 more added to the config at random, repositories dropped from the config (by the PATCH command, between passes or
// while a pass reads) and named again, and full, incremental and backfill passes in random order,
// some of them failing mid-way (a request answered 5xx or rate limited) and resumed from their
// page token by the task's next attempt, GitHub changing meanwhile.
// The sync passes run the real syncTask activity (MockActivityEnvironment) on real Postgres.
//
// Invariants:
// - after every full pass, no record that existed at the provider for the whole of that pass (in
//   a configured repository) is a tombstone (one it missed in a tie of more items changed in one
//   second than a page holds, shifted by an edit, may be stored only by the next pass: the
//   repository's cursor is held there);
// - once the provider is quiet, one incremental pass brings every record the provider has to its
//   current data (no change was skipped);
// - after a quiet full pass and a quiet incremental one, the records feed read from the start
//   (latest state per record, tombstones left out) equals the provider's truth, ids and data;
// - after a repository is dropped from the config (and after every pass since), the feed holds no
//   live record of it: none stays, and no pass that read the older config writes one back.
//
// Shared by test/github-model.test.ts (a few runs in `npm test`) and the longer run of `npm run test:models`.
import { appendFileSync } from 'node:fs';
import fc from 'fast-check';
import { expect } from 'vitest';
import { updateConnection } from '../../commands/connections';
import { readChangesPage } from '../../db/models/records';
import type { Pool } from '../../db/pool';
import { testCommandDeps } from './deps';
import { startFakeGitHub, type FakeGitHub, type FakeGitHubItem } from './fake-github';
import { fakeTemporal } from './fake-temporal';
import { syncDriver } from './sync-driver';

const TOKEN = 'ghp_model_token_1234567890abcdef';
const RESOURCES = ['issues', 'pull_requests'];
/** Configured from the start, and added to the config later. */
const INITIAL = ['m/alpha', 'm/beta', 'm/gamma'];
const SPARE = ['m/delta', 'm/epsilon'];
const REPOS = [...INITIAL, ...SPARE];
/** The fake's clock starts here (far before the real clock, so the pass-start cap never hides a change). */
const BASE_MS = Date.parse('2025-05-01T00:00:00Z');

type Op =
  | { kind: 'edit'; repo: number; item: number; tick: boolean }
  | { kind: 'create'; repo: number; pull: boolean; tick: boolean }
  | { kind: 'delete'; repo: number; item: number; tick: boolean }
  /** `many` items hidden at once (GitHub hides all of a spam account's items together). */
  | { kind: 'hide'; repo: number; item: number; tick: boolean; many: number }
  | { kind: 'transfer'; repo: number; item: number; to: number; tick: boolean };
/** An op applied right after the pass's `after`-th listing request was answered (or after the pass, if it made fewer). */
interface Mutation {
  after: number;
  op: Op;
}
type Step =
  /** `drop`: a configured repository dropped by a PATCH while the pass waits for its `at`-th request. */
  | { kind: 'full' | 'incremental'; mutations: Mutation[]; drop?: { repo: number; at: number }; fail?: Failure }
  | { kind: 'backfill'; mutations: Mutation[]; start: number; length: number }
  | { kind: 'add' }
  | { kind: 'drop'; repo: number };
/** The pass's `at`-th request answered with a 5xx or a rate limit once: the task fails, and its next attempt resumes it. */
interface Failure {
  at: number;
  kind: 'server_error' | 'secondary';
}
interface Scenario {
  perPage: number;
  initial: { issues: number; pulls: number }[];
  steps: Step[];
}

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('edit' as const), repo: fc.nat(), item: fc.nat(), tick: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('create' as const), repo: fc.nat(), pull: fc.boolean(), tick: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), repo: fc.nat(), item: fc.nat(), tick: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('hide' as const), repo: fc.nat(), item: fc.nat(), tick: fc.boolean(), many: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('transfer' as const), repo: fc.nat(), item: fc.nat(), to: fc.nat(), tick: fc.boolean() }) },
);
const mutationsArb = fc.array(fc.record({ after: fc.integer({ min: 1, max: 8 }), op: opArb }), { maxLength: 5 });
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constantFrom('full' as const, 'incremental' as const), mutations: mutationsArb }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constantFrom('full' as const, 'incremental' as const), mutations: mutationsArb,
      drop: fc.record({ repo: fc.nat(), at: fc.integer({ min: 1, max: 8 }) }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constantFrom('full' as const, 'incremental' as const), mutations: mutationsArb,
      fail: fc.record({ at: fc.integer({ min: 2, max: 10 }), kind: fc.constantFrom('server_error' as const, 'secondary' as const) }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('drop' as const), repo: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('backfill' as const), mutations: mutationsArb, start: fc.nat(20), length: fc.integer({ min: 1, max: 20 }) }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'add' as const }) },
);
/** The scenarios the model explores. */
export const scenarioArb: fc.Arbitrary<Scenario> = fc.record({
  perPage: fc.integer({ min: 2, max: 3 }),
  initial: fc.array(fc.record({ issues: fc.nat(5), pulls: fc.nat(4) }), { minLength: REPOS.length, maxLength: REPOS.length }),
  steps: fc.array(stepArb, { minLength: 2, maxLength: 6 }),
});

/** Writes a line to the file GITHUB_MODEL_DEBUG names (a trace of each pass, for a failing seed). */
const trace = (line: string) => {
  if (process.env.GITHUB_MODEL_DEBUG) appendFileSync(process.env.GITHUB_MODEL_DEBUG, `${line}\n`);
};

/** JSON with keys sorted (jsonb does not keep the provider's key order). */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v,
  );
}

/** The provider's truth of `repos`: external id → the data each resource's listing serves. */
function truthOf(fake: FakeGitHub, repos: readonly string[]): Map<string, Map<string, unknown>> {
  const issues = new Map<string, unknown>();
  const pulls = new Map<string, unknown>();
  for (const repo of repos) {
    for (const item of fake.repos.get(repo)!.items) {
      const json = JSON.parse(JSON.stringify(item)) as FakeGitHubItem;
      if ('pull_request' in json) {
        const { pull_request: _omit, ...pr } = json;
        pulls.set(`${repo}#${item.number}`, pr);
      } else issues.set(`${repo}#${item.number}`, json);
    }
  }
  return new Map([
    ['issues', issues],
    ['pull_requests', pulls],
  ]);
}

/** Runs one scenario against a fresh fake GitHub and a new connection on `pool`. */
export async function runScenario(pool: Pool, scenario: Scenario): Promise<void> {
  const fake = await startFakeGitHub({ token: TOKEN });
  try {
    const driver = syncDriver(pool);
    let clock = BASE_MS;
    const at = () => new Date(clock).toISOString().replace('.000Z', 'Z');
    REPOS.forEach((repo, i) => fake.addRepo(repo, 900 + i));
    // Initial items, three to a second (ties at every page boundary).
    let k = 0;
    for (const [i, spec] of scenario.initial.entries()) {
      const kinds = [...Array<boolean>(spec.issues).fill(false), ...Array<boolean>(spec.pulls).fill(true)];
      for (const pull of kinds) {
        clock = BASE_MS + Math.floor(k / 3) * 1000;
        k += 1;
        fake.create(REPOS[i]!, at(), pull);
      }
    }
    let configured = [...INITIAL];
    const config = () => ({ base_url: fake.baseUrl, repositories: configured, resource_types: RESOURCES, per_page: scenario.perPage });
    const id = await driver.connection('github', config(), { token: TOKEN });
    const commands = testCommandDeps(pool, fakeTemporal().client);
    /** Stores the config as the API's PATCH does (a dropped repository's records become tombstones). */
    const patch = async () => {
      trace(`-- config: ${configured.join(', ')}`);
      await updateConnection(commands, id, { config: config() });
    };
    /** Drops configured repository `n` (modulo; one always stays). */
    const drop = async (n: number) => {
      if (configured.length < 2) return;
      const gone = configured[n % configured.length]!;
      configured = configured.filter((r) => r !== gone);
      await patch();
    };

    /** Applies one op to the fake; returns the ids it deleted or hid. */
    const apply = (op: Op): string[] => {
      if (op.tick) clock += 1000;
      trace(`   op ${JSON.stringify(op)} → ${REPOS[op.repo % REPOS.length]} at ${at()} (after request ${fake.requests.length})`);
      const repo = REPOS[op.repo % REPOS.length]!;
      const items = fake.repos.get(repo)!.items;
      if (op.kind === 'create') {
        fake.create(repo, at(), op.pull);
        return [];
      }
      if (op.kind === 'edit') {
        if (items.length === 0) return [];
        fake.touch(repo, items[op.item % items.length]!.number, at());
        return [];
      }
      if (op.kind === 'hide') {
        // Of one kind (all issues, or all pull requests), as a spam account's items are hidden together.
        const pulls = items.filter((i) => 'pull_request' in i);
        const kind = op.item % 2 === 0 && pulls.length > 0 ? pulls : items.filter((i) => !('pull_request' in i));
        if (kind.length === 0) return [];
        const start = Math.floor(op.item / 2) % kind.length;
        const hidden = kind.slice(start, start + op.many).map((i) => i.number);
        for (const n of hidden) fake.hide(repo, n);
        return hidden.map((n) => `${repo}#${n}`);
      }
      const issues = items.filter((i) => !('pull_request' in i));
      if (issues.length === 0) return [];
      const victim = issues[op.item % issues.length]!.number;
      if (op.kind === 'transfer') {
        const to = REPOS.filter((r) => r !== repo)[op.to % (REPOS.length - 1)]!;
        fake.transfer(repo, victim, to, at());
      } else fake.remove(repo, victim);
      return [`${repo}#${victim}`];
    };

    /** Runs a pass with `mutations` applied between its listing requests; returns the ids deleted meanwhile. */
    const runPass = async (kind: 'full' | 'incremental' | 'backfill', mutations: Mutation[], window?: { start: Date; end: Date }, dropAt?: { repo: number; at: number }, fail?: Failure) => {
      const pending = [...mutations].sort((a, b) => a.after - b.after);
      const deleted = new Set<string>();
      let served = 0;
      let asked = 0;
      fake.beforeServe = dropAt
        ? async () => {
          asked += 1;
          if (asked === dropAt.at) await drop(dropAt.repo);
        }
        : null;
      fake.afterServe = () => {
        served += 1;
        while (pending.length > 0 && pending[0]!.after <= served) {
          for (const gone of apply(pending.shift()!.op)) deleted.add(gone);
        }
      };
      const from = fake.requests.length;
      if (fail) fake.setFailure({ ...(fail.kind === 'secondary' ? { kind: 'secondary', retryAfter: 0 } : { kind: 'server_error', status: 502 }), nth: from + fail.at, times: 1 });
      try {
        const mode = kind === 'full' ? 'full' : 'incremental';
        const results = await driver.pass(id, RESOURCES, window ? { mode, window } : { mode, retries: fail ? 1 : 0 });
        for (const [resource, result] of results) expect(result.status, `${kind} pass of ${resource}`).toBe('completed');
      } finally {
        fake.setFailure(null);
        fake.afterServe = null;
        fake.beforeServe = null;
        trace(`-- ${kind} pass${window ? ` [${window.start.toISOString()}, ${window.end.toISOString()})` : ''}: requests ${from + 1}…${fake.requests.length}`);
        for (const [i, r] of fake.requests.slice(from).entries()) trace(`   ${from + i + 1} ${decodeURIComponent(r.url)}${r.headers['if-none-match'] ? ' (conditional)' : ''}`);
        trace(`   ops left: ${JSON.stringify(pending)}; deleted: ${[...deleted].join(', ')}`);
      }
      for (const rest of pending) apply(rest.op);
      return deleted;
    };

    /** The records feed read from the start: each record's latest state, tombstones left out, by resource. */
    const feed = async () => {
      const { changes } = await readChangesPage(pool, { connectionId: id, afterSeq: '0', limit: 100_000 });
      const out = new Map(RESOURCES.map((r) => [r, new Map<string, unknown>()]));
      for (const change of changes) if (change.change !== 'delete') out.get(change.resource_type)!.set(change.external_id, change.data);
      return out;
    };

    /** No live record of a repository not configured: a drop tombstones them, no pass writes one back. */
    const noneOfDropped = async (when: string) => {
      const dropped = REPOS.filter((r) => !configured.includes(r));
      for (const [resource, records] of await feed()) {
        const alive = [...records.keys()].filter((x) => dropped.some((r) => x.startsWith(`${r}#`)));
        expect(alive, `${resource} of a repository dropped from the config, live ${when}`).toEqual([]);
      }
    };

    /** The tombstones, by resource. */
    const tombstones = async () => new Map(await Promise.all(RESOURCES.map(async (r) => [r, new Set(await driver.tombstones(id, r))] as const)));

    for (const step of scenario.steps) {
      if (step.kind === 'add') {
        // A spare repository, or one dropped earlier (named again: its records come back).
        const next = REPOS.find((repo) => !configured.includes(repo));
        if (next) {
          configured = [...configured, next];
          await patch();
        }
        continue;
      }
      if (step.kind === 'drop') {
        await drop(step.repo);
        await noneOfDropped('after the PATCH that dropped it');
        continue;
      }
      if (step.kind === 'backfill') {
        const start = new Date(BASE_MS + step.start * 1000);
        await runPass('backfill', step.mutations, { start, end: new Date(start.getTime() + step.length * 1000) });
        continue;
      }
      // Whatever exists now and is not deleted during the pass existed for the whole pass.
      const before = truthOf(fake, configured);
      const deleted = await runPass(step.kind, step.mutations, undefined, step.drop, step.fail);
      await noneOfDropped(`after a ${step.kind} pass`);
      if (step.kind === 'full') {
        const dead = await tombstones();
        // A repository dropped while the pass ran had its records tombstoned by the drop.
        const kept = (x: string) => configured.some((r) => x.startsWith(`${r}#`));
        for (const [resource, ids] of before) {
          const wrong = [...ids.keys()].filter((x) => kept(x) && !deleted.has(x) && dead.get(resource)!.has(x));
          expect(wrong, `${resource} that existed for the whole of a full pass but are tombstones after it`).toEqual([]);
        }
      }
    }

    // The provider is quiet from here on. One incremental pass catches up on every change.
    await runPass('incremental', []);
    const truth = truthOf(fake, configured);
    let stored = await feed();
    for (const [resource, items] of truth) {
      const stale = [...items].filter(([x, data]) => canonical(stored.get(resource)!.get(x)) !== canonical(data)).map(([x]) => x);
      expect(stale, `${resource} an incremental pass left missing or stale once the provider was quiet`).toEqual([]);
    }
    // A full pass and an incremental one: the feed equals the truth.
    await runPass('full', []);
    await runPass('incremental', []);
    stored = await feed();
    for (const [resource, items] of truth) expect(stored.get(resource), `${resource} after a quiet full and incremental pass`).toEqual(items);
  } finally {
    await fake.close();
  }
}

/**
 * Checks the model over `numRuns` random scenarios (GITHUB_MODEL_RUNS overrides) with a seed that
 * is printed (FC_SEED, else the globally configured one, else a fresh one), so a failure replays.
 */
export async function checkGitHubModel(pool: Pool, numRuns: number): Promise<void> {
  const runs = Number(process.env.GITHUB_MODEL_RUNS ?? numRuns);
  const seed = Number(process.env.FC_SEED ?? fc.readConfigureGlobal().seed ?? Math.floor(Math.random() * 2 ** 31));
  console.log(`github model: ${runs} runs, seed ${seed} (replay with FC_SEED=${seed})`);
  await fc.assert(
    fc.asyncProperty(scenarioArb, (scenario) => runScenario(pool, scenario)),
    // FC_PATH (from a failure's report) replays just the failing run.
    { numRuns: runs, seed, endOnFailure: true, ...(process.env.FC_PATH && { path: process.env.FC_PATH }) },
  );
}
