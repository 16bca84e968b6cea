// A process that exports traces says so in its log, naming the OTLP endpoint without the password
// a URL may hold (`http://user:password@collector:4318`): a real process (runProcess, as the API
// starts) with tracing on, whose boot then fails on a Postgres that does not answer.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PASSWORD = 's3cret-otlp-password';

describe('the OTLP endpoint in the log', () => {
  it("is logged with its URL's password masked", () => {
    const script = `
      import { loadConfig } from './lib/config.ts';
      import { runProcess } from './infra/boot.ts';
      const config = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:${PASSWORD}@127.0.0.1:9/', DATABASE_URL: 'postgres://synctide@127.0.0.1:9/none', TEMPORAL_ADDRESS: '127.0.0.1:9' });
      runProcess(config, { name: 'api', sdkRuntime: false, pool: 'api', providers: [] }, async () => {});
    `;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    const lines = run.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.find((l) => l.msg === 'traces are exported over OTLP')?.endpoint).toBe('http://otel:***@127.0.0.1:9/');
    expect(lines.some((l) => l.msg === 'start failed')).toBe(true);
    expect(`${run.stdout}${run.stderr}`).not.toContain(PASSWORD);
  }, 90_000);

  it('is not used when OTEL_SDK_DISABLED is true (any case), as the OpenTelemetry SDK specifies', () => {
    const script = `
      import { loadConfig } from './lib/config.ts';
      import { runProcess } from './infra/boot.ts';
      const config = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9/', OTEL_SDK_DISABLED: 'TRUE', DATABASE_URL: 'postgres://synctide@127.0.0.1:9/none', TEMPORAL_ADDRESS: '127.0.0.1:9' });
      runProcess(config, { name: 'api', sdkRuntime: false, pool: 'api', providers: [] }, async () => {});
    `;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    const lines = run.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.some((l) => l.msg === 'start failed')).toBe(true);
    expect(lines.filter((l) => /trac/i.test(String(l.msg))).map((l) => l.msg)).toEqual(['tracing is off: OTEL_SDK_DISABLED is true']);
  }, 90_000);
});
