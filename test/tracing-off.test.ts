// Tracing off loads nothing of OpenTelemetry but its API (the no-op the logger asks for the active
// span): a process's modules, imported as the API and worker processes import them, leave the SDK,
// its exporter (protobufjs), the instrumentations and the Temporal and Hono interceptors unloaded.
// Starting tracing loads them. Each case runs in a fresh Node process, which reports the
// OpenTelemetry packages it holds.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The OpenTelemetry packages a fresh process holds after running `body` (an ES module's text). */
function packagesLoadedBy(body: string): string[] {
  const script = `
    import { createRequire } from 'node:module';
    ${body}
    const names = Object.keys(createRequire(import.meta.url).cache)
      .map((file) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(file)?.[1])
      .filter((name) => name && /opentelemetry|otel|protobuf/.test(name));
    console.log(JSON.stringify([...new Set(names)].sort()));
  `;
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: '' } });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  return JSON.parse(run.stdout.trim().split('\n').at(-1)!) as string[];
}

/** The modules the API and worker processes are made of (their entry points start servers at import). */
const PROCESS_MODULES = ['./processes/service.ts', './infra/boot.ts', './api/app.ts', './workers/run-worker.ts', './workers/create-worker.ts', './infra/temporal-connection.ts'];
const importProcessModules = PROCESS_MODULES.map((file) => `await import(${JSON.stringify(file)});`).join('\n');

describe('tracing off', () => {
  it("loads no OpenTelemetry package but the API's, and starting tracing loads the SDK", () => {
    expect(packagesLoadedBy(importProcessModules)).toEqual(['@opentelemetry/api']);

    const started = packagesLoadedBy(`${importProcessModules}
      const { startTracing } = await import('./lib/tracing.ts');
      const tracing = await startTracing({ process: 'test' });
      await tracing.shutdown();`);
    expect(started).toEqual(expect.arrayContaining(['@opentelemetry/sdk-trace-node', '@opentelemetry/instrumentation-http', '@opentelemetry/instrumentation-pg', '@temporalio/interceptors-opentelemetry']));
  }, 120_000);
});
