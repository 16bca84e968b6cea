import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { ConfigError, loadConfig, requireKeyring, shownValue } from '../lib/config';

describe('configuration', () => {
  it('uses documented defaults for an empty environment', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      API_PORT: 3000,
      TEMPORAL_UI_PORT: 8233,
      TEMPORAL_NAMESPACE: 'default',
      SCHEDULER_TICK_SECONDS: 60,
      JITTER_PCT_MIN: 0,
      JITTER_PCT_MAX: 0.2,
      MAX_OVERRIDDEN_INTERVAL_SECONDS: 86400,
      RETENTION_DAYS: 7,
      IMMEDIATE_SYNC_TIMEOUT_SECONDS: 60,
    });
    expect(config.DATABASE_URL).toBeUndefined();
  });

  it('names the variable and the rule of an invalid value', () => {
    expect(() => loadConfig({ API_PORT: 'abc' })).toThrow(ConfigError);
    expect(() => loadConfig({ API_PORT: 'abc' })).toThrow(/API_PORT: must be an integer port number between 1 and 65535 \(got "abc"\)/);
    expect(() => loadConfig({ DATABASE_URL: 'mysql://x' })).toThrow(/DATABASE_URL: must be a postgres:\/\//);
    expect(() => loadConfig({ TEMPORAL_ADDRESS: 'http://x' })).toThrow(/TEMPORAL_ADDRESS: must be host:port/);
    expect(() => loadConfig({ JITTER_PCT_MAX: '1.5' })).toThrow(/JITTER_PCT_MAX: must be a number from 0 up to \(not including\) 1/);
    expect(() => loadConfig({ WORKFLOW_BUNDLE_PATH: '/no/such/bundle.js' })).toThrow(/WORKFLOW_BUNDLE_PATH: no file there; build it with `npm run build`/);
    expect(loadConfig({ WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath') }).WORKFLOW_BUNDLE_PATH).toBe(inject('workflowBundlePath'));
  });

  it('refuses an empty or blank numeric variable, naming it, instead of reading it as 0', () => {
    // Every variable whose default is a number; an empty value is a mistake (a statement timeout
    // of "" must not turn the timeout off, nor a JITTER_PCT_MAX of "" take the jitter away).
    const defaults = loadConfig({}) as Record<string, unknown>;
    const numeric = Object.keys(defaults).filter((name) => typeof defaults[name] === 'number' && name !== 'WORKER_TARGET_CPU');
    expect(numeric).toEqual(expect.arrayContaining(['API_STATEMENT_TIMEOUT_SECONDS', 'JITTER_PCT_MAX', 'API_PORT', 'API_RATE_LIMIT_PER_SECOND']));
    for (const name of numeric) {
      for (const blank of ['', '  ']) {
        expect(() => loadConfig({ [name]: blank }), `${name}=${JSON.stringify(blank)}`).toThrow(new RegExp(`^Invalid configuration:\\n  ${name}: must `));
      }
    }
    // WORKER_TARGET_CPU (like the string variables) reads empty as unset: its default.
    expect(loadConfig({ WORKER_TARGET_CPU: '' }).WORKER_TARGET_CPU).toBe(0.7);
  });

  it('refuses a duration too long for the timer or Postgres setting it becomes, naming the variable', () => {
    // A Node timer longer than 2^31 - 1 ms fires after 1 ms (TimeoutOverflowWarning), and Postgres
    // refuses a statement or idle timeout above that many ms: an operator's "very long" would make
    // every immediate sync, provider request or query time out at once, or the reconcile keeper
    // run every millisecond. A statement timeout's client-side limit is twice it (db/pool.ts).
    const limits = {
      API_STATEMENT_TIMEOUT_SECONDS: 1_073_741,
      WORKER_STATEMENT_TIMEOUT_SECONDS: 1_073_741,
      IDLE_IN_TRANSACTION_TIMEOUT_SECONDS: 2_147_483,
      SCHEDULER_TICK_SECONDS: 2_147_483,
      IMMEDIATE_SYNC_TIMEOUT_SECONDS: 2_147_483,
      PROVIDER_REQUEST_TIMEOUT_SECONDS: 2_147_483,
    };
    for (const [name, max] of Object.entries(limits)) {
      expect((loadConfig({ [name]: String(max) }) as Record<string, unknown>)[name]).toBe(max);
      expect(() => loadConfig({ [name]: String(max + 1) }), name).toThrow(new RegExp(`^Invalid configuration:\\n  ${name}: must be .*at most ${max}`));
      expect(() => loadConfig({ [name]: '9999999999' }), name).toThrow(new RegExp(`^Invalid configuration:\\n  ${name}: must be .*at most ${max}`));
    }
  });

  it('reads the name variables without surrounding blanks, and refuses one that is empty or blank, naming it', () => {
    // An API given `synctide ` (a stray blank in its .env) would start workflows on a task queue
    // its workers, given `synctide`, never poll: every sync would wait forever, without an error.
    for (const name of ['TEMPORAL_TASK_QUEUE', 'TEMPORAL_NAMESPACE', 'API_HOST', 'DATA_DIR']) {
      expect((loadConfig({ [name]: ' synctide \t' }) as Record<string, unknown>)[name], name).toBe('synctide');
      for (const blank of ['', '   ']) {
        expect(() => loadConfig({ [name]: blank }), `${name}=${JSON.stringify(blank)}`).toThrow(new RegExp(`^Invalid configuration:\\n  ${name}: must not be empty`));
      }
    }
  });

  it('turns traces on only with an http(s) OTEL_EXPORTER_OTLP_ENDPOINT', () => {
    expect(loadConfig({}).OTEL_EXPORTER_OTLP_ENDPOINT).toBeUndefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ' ' }).OTEL_EXPORTER_OTLP_ENDPOINT).toBeUndefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector:4318' }).OTEL_EXPORTER_OTLP_ENDPOINT).toBe('http://otel-collector:4318');
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'otel-collector:4318' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT: must be an http\(s\) URL/);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://otel-collector:4317' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT: must be an http\(s\) URL/);
  });

  it('rejects jitter bounds whose minimum exceeds the maximum', () => {
    expect(() => loadConfig({ JITTER_PCT_MIN: '0.3', JITTER_PCT_MAX: '0.1' })).toThrow(/JITTER_PCT_MIN: must not exceed JITTER_PCT_MAX/);
    expect(loadConfig({ JITTER_PCT_MIN: '0.05', JITTER_PCT_MAX: '0.3' })).toMatchObject({ JITTER_PCT_MIN: 0.05, JITTER_PCT_MAX: 0.3 });
  });

  it('refuses a DEFAULT_INTERVAL_SECONDS below the smallest allowed interval (60 s)', () => {
    expect(() => loadConfig({ DEFAULT_INTERVAL_SECONDS: '30' })).toThrow(ConfigError);
    expect(() => loadConfig({ DEFAULT_INTERVAL_SECONDS: '30' })).toThrow(/DEFAULT_INTERVAL_SECONDS: must be at least 60 \(the smallest allowed interval\) \(got "30"\)/);
    expect(loadConfig({ DEFAULT_INTERVAL_SECONDS: '60' }).DEFAULT_INTERVAL_SECONDS).toBe(60);
  });

  it('reports every invalid variable at once', () => {
    try {
      loadConfig({ API_PORT: '0', LOG_LEVEL: 'loud' });
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).toMatch(/API_PORT/);
      expect((err as Error).message).toMatch(/LOG_LEVEL/);
    }
  });
});

describe('configuration errors never echo a secret', () => {
  it('names a secret variable and its rule without its value', () => {
    const message = (() => {
      try {
        loadConfig({ ADMIN_API_KEY: 'short-secret', API_RATE_LIMIT_BURST: '0' });
      } catch (err) {
        return (err as Error).message;
      }
      return '';
    })();
    expect(message).toMatch(/ADMIN_API_KEY: must be at least 32 random characters/m);
    expect(message).toMatch(/API_RATE_LIMIT_BURST: must be a positive integer \(got "0"\)/);
    expect(message).not.toContain('short-secret');
  });

  it('never echoes a database URL that is not a scheme:// URL: a libpq keyword string or a URL without its scheme holds the password as it is', () => {
    for (const name of ['DATABASE_URL', 'DATABASE_MIGRATION_URL']) {
      for (const value of ['host=db user=synctide password=hunter2 dbname=synctide', 'synctide:hunter2@db:5432/synctide', 'postgres:/synctide:hunter2@db/synctide']) {
        let message = '';
        try {
          loadConfig({ [name]: value });
        } catch (err) {
          message = (err as Error).message;
        }
        expect(message).toMatch(new RegExp(`^Invalid configuration:\\n  ${name}: must be a postgres:// or postgresql:// connection URL$`));
        expect(message, `${name}=${value}`).not.toContain('hunter2');
      }
    }
  });

  it('shows values of variables named like secrets never, and masks the password of a URL', () => {
    for (const name of ['ADMIN_API_KEY', 'CREDENTIALS_KEY', 'MY_SECRET', 'GITHUB_TOKEN', 'DB_PASSWORD', 'api_key']) {
      expect(shownValue(name, 'value')).toBeUndefined();
    }
    expect(shownValue('DATABASE_URL', 'mysql://me:p@ss:word@db:5432/x')).toBe('mysql://me:***@db:5432/x');
    expect(shownValue('DATABASE_URL', 'postgres://db/x')).toBe('postgres://db/x');
    expect(shownValue('DATABASE_URL', 'mysql://me:pass word@db/x')).toBe('mysql://me:***@db/x');
    // No URL: where its password ends cannot be told, so nothing of it is shown.
    expect(shownValue('DATABASE_URL', 'postgres://me:pass@db:54x32/x')).toBeUndefined();
    expect(shownValue('WORKFLOW_BUNDLE_PATH', '/no//such/bundle.js')).toBe('/no//such/bundle.js');
    expect(shownValue('API_PORT', 'abc')).toBe('abc');
    expect(() => loadConfig({ DATABASE_URL: 'mysql://u:hunter2@db/x' })).toThrow(/\(got "mysql:\/\/u:\*\*\*@db\/x"\)/);
    expect(() => loadConfig({ DATABASE_URL: 'mysql://u:hunter2@db/x' })).not.toThrow(/hunter2/);
  });

  it('refuses to run the API or a worker without a credentials key, naming CREDENTIALS_KEY', () => {
    expect(() => requireKeyring(loadConfig({}), 'npm run api')).toThrow(/CREDENTIALS_KEY: is required for npm run api/);
    expect(() => requireKeyring(loadConfig({ CREDENTIALS_KEY: 'too-short-secret' }), 'npm run worker')).toThrow(/CREDENTIALS_KEY: must be 32 bytes, base64-encoded/);
    expect(() => requireKeyring(loadConfig({ CREDENTIALS_KEY: 'too-short-secret' }), 'npm run worker')).not.toThrow(/too-short-secret/);
    const a = Buffer.alloc(32, 1).toString('base64');
    const b = Buffer.alloc(32, 2).toString('base64');
    expect(() => requireKeyring(loadConfig({ CREDENTIALS_KEYS: `old:${a},new:${b}` }), 'x')).toThrow(/CREDENTIALS_ACTIVE_KEY_ID: is required when several keys/);
    expect(() => requireKeyring(loadConfig({ CREDENTIALS_KEYS: `old:${a}`, CREDENTIALS_ACTIVE_KEY_ID: 'nope' }), 'x')).toThrow(/must be one of the configured key ids \(old\)/);
    const ring = requireKeyring(loadConfig({ CREDENTIALS_KEY: a, CREDENTIALS_KEYS: `new:${b}`, CREDENTIALS_ACTIVE_KEY_ID: 'new' }), 'x');
    expect([ring.activeId, [...ring.keys.keys()]]).toEqual(['new', ['default', 'new']]);
  });
});

describe('DATABASE_URL with DATABASE_PASSWORD', () => {
  it('refuses a DATABASE_URL that is not a URL with a ConfigError naming it, never echoing its password', async () => {
    const env = { DATABASE_URL: 'postgres://app:hunter2-old-pass@db:54x32/synctide', DATABASE_PASSWORD: 'the-new-password' };
    let thrown: unknown;
    try {
      loadConfig(env);
    } catch (err) {
      thrown = err;
    }
    expect(thrown, 'an invalid DATABASE_URL must be refused at configuration').toBeInstanceOf(ConfigError);
    expect((thrown as Error).message).toMatch(/DATABASE_URL: does not parse as a URL: it must have the form postgres:\/\/user:password@host:port\/database/);
    expect((thrown as Error).message).not.toContain('hunter2-old-pass');
    // The same for the migration URL, with or without a password to put in.
    expect(() => loadConfig({ DATABASE_MIGRATION_URL: 'postgres://owner:hunter2@db:5432x/x' })).toThrow(/DATABASE_MIGRATION_URL: does not parse as a URL/);
    expect(() => loadConfig({ DATABASE_MIGRATION_URL: 'postgres://owner:hunter2@db:5432x/x' })).not.toThrow(/hunter2/);
    // Without a host there is no place for the password: refused, naming both variables.
    expect(() => loadConfig({ DATABASE_URL: 'postgres:///synctide', DATABASE_PASSWORD: 'pw' })).toThrow(/DATABASE_URL: must name its host for DATABASE_PASSWORD/);

    // What an operator sees: `npm run worker` with that environment.
    const root = fileURLToPath(new URL('..', import.meta.url));
    const output = await new Promise<string>((resolve) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', 'workers/main.ts'],
        { cwd: root, env: { PATH: process.env.PATH ?? '', TEMPORAL_ADDRESS: '127.0.0.1:1', CREDENTIALS_KEY: Buffer.alloc(32, 7).toString('base64'), ...env } },
        (_err, stdout, stderr) => resolve(stdout + stderr),
      );
    });
    expect(output).toMatch(/DATABASE_URL: does not parse as a URL/);
    expect(output).not.toContain('hunter2-old-pass');
  });

  it('connects with a DATABASE_PASSWORD (and migration password) holding %41, URL delimiters, spaces or any Unicode', async () => {
    const admin = new URL(inject('pgAdminUrl'));
    const role = `config_pw_${randomBytes(4).toString('hex')}`;
    const passwords = ['Ab%41cd', '%E2%82%AC', '100%', 'p@ss:w/rd#?x&y=z', 'with inner spaces', 'ünï©ødé 日本語 😀', `'"\\\`[]{}|^<>!$*()~+;`];
    const client = new pg.Client({ connectionString: admin.toString() });
    await client.connect();
    await client.query(`create role ${client.escapeIdentifier(role)} login`);
    try {
      const results: Record<string, string> = {};
      for (const password of passwords) {
        await client.query(`alter role ${client.escapeIdentifier(role)} password ${client.escapeLiteral(password)}`);
        const url = `postgres://${role}@${admin.hostname}:${admin.port}/postgres`;
        const config = loadConfig({ DATABASE_URL: url, DATABASE_PASSWORD: password, DATABASE_MIGRATION_URL: url, DATABASE_MIGRATION_PASSWORD: password });
        for (const connectionString of [config.DATABASE_URL, config.DATABASE_MIGRATION_URL]) {
          const probe = new pg.Client({ connectionString });
          results[password] = await probe.connect().then(
            () => 'connected',
            (err: { code?: string; message: string }) => `${err.code}: ${err.message}`,
          );
          await probe.end().catch(() => undefined);
          if (results[password] !== 'connected') break;
        }
      }
      expect(results).toEqual(Object.fromEntries(passwords.map((password) => [password, 'connected'])));
    } finally {
      await client.query(`drop role if exists ${client.escapeIdentifier(role)}`);
      await client.end();
    }
  });
});

describe('entry points refuse to start without a credentials key', () => {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const run = (script: string, env: Record<string, string>) =>
    new Promise<{ code: number | null; output: string }>((resolve) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', script],
        // Syntactically valid servers that are never reached: the process must stop at its configuration.
        { cwd: root, env: { PATH: process.env.PATH ?? '', DATABASE_URL: 'postgres://127.0.0.1:1/x', TEMPORAL_ADDRESS: '127.0.0.1:1', ...env } },
        (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: stdout + stderr }),
      );
    });

  it('npm run api and npm run worker exit 1 naming CREDENTIALS_KEY, and never print a key given', async () => {
    const [api, worker, bad] = await Promise.all([
      run('api/main.ts', { ADMIN_API_KEY: 'q7Vd2Lx9Rb4Nf8Tz1Hc6Wm3Kp5Ys0Ge7' }),
      run('workers/main.ts', {}),
      run('workers/main.ts', { CREDENTIALS_KEY: 'not-a-32-byte-key-value' }),
    ]);
    expect(api).toMatchObject({ code: 1 });
    expect(api.output).toMatch(/CREDENTIALS_KEY: is required for npm run api/);
    expect(worker).toMatchObject({ code: 1 });
    expect(worker.output).toMatch(/CREDENTIALS_KEY: is required for npm run worker/);
    expect(bad).toMatchObject({ code: 1 });
    expect(bad.output).toMatch(/CREDENTIALS_KEY: must be 32 bytes, base64-encoded/);
    expect(bad.output).not.toContain('not-a-32-byte-key-value');
  });
});

describe('the configuration reference (docs/operations.md)', () => {
  it('is the table lib/config-docs.ts and the schemas give (regenerate with npm run docs:config)', async () => {
    const { readFileSync } = await import('node:fs');
    const { configTable } = await import('../lib/config-docs');
    const { withConfigTable } = await import('../scripts/config-table');
    const page = readFileSync(new URL('../docs/operations.md', import.meta.url), 'utf8');
    expect(page).toBe(withConfigTable(page, configTable()));
    // Every variable of the main schema has its row, with the schema's default where it shows one.
    expect(configTable()).toContain('| `API_PORT` | `3000` |');
    expect(configTable()).toContain('`RATE_LIMIT_BASE_SECONDS`, `RATE_LIMIT_MAX_SECONDS`, `RATE_LIMIT_JITTER_FACTOR` | `5`, `900`, `0.1` |');
  });

  it('names every path the worker serves on WORKER_METRICS_PORT (the chart probes its /readyz there)', async () => {
    const { readFileSync } = await import('node:fs');
    const { CONFIG_DOCS } = await import('../lib/config-docs');
    const worker = readFileSync(new URL('../workers/main.ts', import.meta.url), 'utf8');
    const paths = ['/metrics', ...[...worker.matchAll(/app\.get\('([^']+)'/g)].map((m) => m[1]!)];
    expect(paths).toEqual(expect.arrayContaining(['/metrics', '/healthz', '/readyz']));
    for (const served of paths) expect(CONFIG_DOCS.WORKER_METRICS_PORT.meaning, served).toContain(`\`${served}\``);
  });
});
