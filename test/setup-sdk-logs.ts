// The Temporal SDK logs through one Runtime per process (the worker's state changes, failed
// activities with their stacks, native core warnings). In tests those lines go to a buffer that
// is printed only when a test fails, so a passing run shows results, not log dumps.
import { DefaultLogger, Runtime, makeTelemetryFilterString, type LogEntry } from '@temporalio/worker';
import { afterEach } from 'vitest';

// One buffer per process: the Runtime's logger is installed once, while this file runs again
// before each test file (the files that run alone share one process).
const buffered: string[] = ((globalThis as { synctideSdkLog?: string[] }).synctideSdkLog ??= []);
const MAX_LINES = 2000;

function keep(entry: LogEntry): void {
  const meta = entry.meta && Object.keys(entry.meta).length > 0 ? ` ${JSON.stringify(entry.meta)}` : '';
  buffered.push(`[sdk ${entry.level}] ${entry.message}${meta}`);
  if (buffered.length > MAX_LINES) buffered.shift();
}

try {
  Runtime.install({
    logger: new DefaultLogger('INFO', keep),
    // Native (Rust core) log lines are forwarded to the same logger instead of the console.
    telemetryOptions: { logging: { forward: {}, filter: makeTelemetryFilterString({ core: 'WARN', other: 'ERROR' }) } },
  });
} catch {
  // A Runtime exists already (installed by the code under test): it logs as configured there.
}

afterEach((context) => {
  if (context.task.result?.state === 'fail' && buffered.length > 0) {
    process.stderr.write(`Temporal SDK log of the failed test "${context.task.name}":\n${buffered.join('\n')}\n`);
  }
  buffered.length = 0;
});
