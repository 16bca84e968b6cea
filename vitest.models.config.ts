import { defineConfig } from 'vitest/config';

// `npm run test:models`: the long runs of the data-path models (test/faults/*.model.slow.test.ts),
// many random histories of a provider changing under a sync. They are CPU-bound, so they run on
// their own, after the fault tests, whose timing-sensitive processes they would otherwise starve.
export default defineConfig({
  test: {
    include: ['test/faults/**/*.model.slow.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup-fast-check.ts', 'test/setup-sdk-logs.ts', 'test/setup-demo-connector.ts'],
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
    testTimeout: 1_200_000,
    hookTimeout: 180_000,
    reporters: ['default'],
  },
});
