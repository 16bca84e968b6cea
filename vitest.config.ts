import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Test files that must not run beside the CPU-heavy side-by-side group: those on a time-skipping
 * server (its clock is sensitive to a starved worker: env.sleep hung under CPU contention). Decided
 * by what a file says, so a new file falls on the right side without being listed here. A file
 * reading the server-wide views (pg_stat_activity, pg_locks) may run beside others: it reads only
 * its own database's sessions (`datname = current_database()`, a pid of its own, or pg_locks'
 * `database`), as test/pg-views-scoped.test.ts checks of every file.
 */
const TIMING_SENSITIVE = /time-?skipping|TimeSkipping/;
const root = path.dirname(fileURLToPath(import.meta.url));
const files = readdirSync(path.join(root, 'test'), { recursive: true, encoding: 'utf8' })
  .filter((file) => file.endsWith('.test.ts') && !file.endsWith('.slow.test.ts'))
  .map((file) => `test/${file.split('\\').join('/')}`);
/**
 * Files that must not run beside CPU-heavy files for what they time in real time: the shared rate
 * budget's job must be seen waiting within a 3 s provider window; a tenant's four jobs held back
 * by the worker pool's turns must all complete within 45 s once let go (two were still queued
 * beside the side-by-side group, 2026-11-30); another tenant's job must complete within 50 s beside a
 * tenant's purges held by the pool's turns (worker-pool-purges, built as worker-pool-tenants).
 */
const ALSO_SENSITIVE = ['test/rate-budget.test.ts', 'test/worker-pool-tenants.test.ts', 'test/worker-pool-purges.test.ts'];
const sensitive = files.filter((file) => ALSO_SENSITIVE.includes(file) || TIMING_SENSITIVE.test(readFileSync(path.join(root, file), 'utf8')));

export default defineConfig({
  test: {
    // Fault tests that take minutes each run in `npm run test:faults` (vitest.faults.config.ts).
    exclude: [...configDefaults.exclude, 'test/**/*.slow.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup-fast-check.ts', 'test/setup-sdk-logs.ts', 'test/setup-demo-connector.ts'],
    // Each file owns its database (cloned from the template) and Temporal server, and its fork.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 180_000,
    reporters: ['default'],
    // Most files spend their time waiting (timers, servers, child processes): three at a time on
    // two cores (the machine was about half idle with two: `npm test` 329 s with two, 291-305 s
    // with three, 279 s with four, on 2026-11-29); then the timing-sensitive files, two at a time
    // with nothing else beside them (the machine is mostly idle while they run: one at a time took
    // 115 s of a 288 s `npm test`, two at a time 64 s, on 2026-11-30). Both groups run their files
    // in long-lived processes (isolate: false): a process loads the modules once instead of once a
    // file (about 45 s of the side-by-side group and 30 s of the other). So module state lives on
    // from one file to the next in a process: each file makes its own database and Temporal
    // server, restores what it stubs, and counts only what it made.
    projects: [
      {
        extends: true,
        test: { name: 'side-by-side', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, 'test/**/*.slow.test.ts', ...sensitive], maxWorkers: 3, isolate: false, sequence: { groupOrder: 0 } },
      },
      // A failed test of this group is run once more (vitest prints it as retried): the
      // time-skipping test server now and then stalls a test for good (env.sleep never returning:
      // schedule-options, 4 tests x 60 s; a job workflow's first activity never dispatched:
      // tenant-limits-wait, 45 s), in one fresh-clone CI run in four on 2026-11-29, each passing
      // alone and in the other runs. A real defect fails its retry too.
      {
        extends: true,
        test: { name: 'timing-sensitive', include: sensitive.length > 0 ? sensitive : ['test/none'], maxWorkers: 2, isolate: false, retry: 1, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
