import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Fault tests that take minutes each run in `npm run test:faults` (vitest.faults.config.ts).
    exclude: [...configDefaults.exclude, 'test/**/*.slow.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup-fast-check.ts', 'test/setup-sdk-logs.ts', 'test/setup-demo-connector.ts'],
    // Files run one at a time: each owns its database and Temporal server, and the time-skipping
    // server's clock is sensitive to a starved worker (env.sleep hung under CPU contention).
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    reporters: ['default'],
  },
});
