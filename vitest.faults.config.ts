import { defineConfig } from 'vitest/config';

// `npm run test:faults`: the fault tests that take minutes each (test/faults/*.slow.test.ts).
// Each file owns its database, Temporal server and Synctide processes, and most of their time is
// spent waiting (heartbeat timeouts, outages, sleeping connections), so the files run side by side.
export default defineConfig({
  test: {
    include: ['test/faults/**/*.slow.test.ts'],
    // The long model runs are CPU-bound: `npm run test:models` runs them on their own.
    exclude: ['test/faults/**/*.model.slow.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup-fast-check.ts', 'test/setup-sdk-logs.ts', 'test/setup-demo-connector.ts'],
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 5,
    testTimeout: 600_000,
    hookTimeout: 180_000,
    reporters: ['default'],
  },
});
