// The Temporal SDK logs through one Runtime per process (the worker's state changes, failed
// activities with their stacks, native core warnings). In tests those lines go to a buffer that
// is printed only when a test fails, so a passing run shows results, not log dumps.
import { createRequire } from 'node:module';
import type * as Sdk from '@temporalio/worker';
import { afterEach, beforeAll, beforeEach } from 'vitest';

// One buffer per process: the Runtime's logger is installed once, while this file runs again
// before each test file (the files of a group share a process).
const buffered: string[] = ((globalThis as { synctideSdkLog?: string[] }).synctideSdkLog ??= []);
const MAX_LINES = 2000;

function keep(entry: Sdk.LogEntry): void {
  const meta = entry.meta && Object.keys(entry.meta).length > 0 ? ` ${JSON.stringify(entry.meta)}` : '';
  buffered.push(`[sdk ${entry.level}] ${entry.message}${meta}`);
  if (buffered.length > MAX_LINES) buffered.shift();
}

/**
 * The SDK's module of the Runtime. The SDK is not loaded here: loading it (with webpack, about a
 * second a file) is left to the files that use Temporal. A file has loaded it by the time its
 * hooks run when it imports it, and the Runtime is created only by a connection or worker made in
 * a hook or test: the logger is installed before those (before the file's first hook and each
 * test), once the module is loaded.
 */
const require = createRequire(import.meta.url);
const RUNTIME_MODULE = require.resolve('@temporalio/worker/lib/runtime.js');

function installOnceLoaded(): void {
  if (!require.cache[RUNTIME_MODULE]) return;
  const { DefaultLogger, Runtime, makeTelemetryFilterString } = require('@temporalio/worker') as typeof Sdk;
  try {
    Runtime.install({
      logger: new DefaultLogger('INFO', keep),
      // Native (Rust core) log lines are forwarded to the same logger instead of the console.
      telemetryOptions: { logging: { forward: {}, filter: makeTelemetryFilterString({ core: 'WARN', other: 'ERROR' }) } },
    });
  } catch {
    // A Runtime exists already (installed before, or by the code under test): it logs as configured there.
  }
}
beforeAll(installOnceLoaded);
beforeEach(installOnceLoaded);

afterEach((context) => {
  if (context.task.result?.state === 'fail' && buffered.length > 0) {
    process.stderr.write(`Temporal SDK log of the failed test "${context.task.name}":\n${buffered.join('\n')}\n`);
  }
  buffered.length = 0;
});
