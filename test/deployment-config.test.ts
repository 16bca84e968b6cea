// Deployment configuration: admin keys that are placeholders or too short
// are refused, secrets come from *_FILE files and are never echoed, the Temporal TLS/mTLS and API
// key settings become the connection options of client and worker, pool limits per role, and the
// Helm chart's Postgres URLs mean what values.yaml says their sslmode means.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createPool } from '../db/pool';
import { poolLimits, poolSize, workflowCacheSize } from '../infra/boot';
import { temporalConnectionOptions } from '../infra/temporal-connection';
import { adminKeyProblem } from '../lib/admin-key';
import { ConfigError, loadConfig, requireAdminKey, temporalSecurity } from '../lib/config';
import { scheduledSlotOptions } from '../workers/create-worker';
import { LaneGate, ScheduledWorkflowTaskSlots } from '../workers/lane-gate';

const GOOD_KEY = randomBytes(32).toString('hex');

let dir: string;
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-config-'));
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

describe('ADMIN_API_KEY', () => {
  it('refuses the README example, other placeholders, short and patterned keys, without echoing them', () => {
    const refused = [
      'change-me-to-a-long-secret', // the README's old example
      'change-me-to-a-long-secret-0123456789abcdef', // the same, made long enough
      'my-placeholder-admin-key-for-production-use',
      'a'.repeat(40),
      '0123456789abcdefghijklmnopqrstuvwxyz0123',
      randomBytes(15).toString('hex'), // 30 random characters: too short
    ];
    for (const key of refused) {
      expect(adminKeyProblem(key), key).toBeDefined();
      let message = '';
      try {
        loadConfig({ ADMIN_API_KEY: key });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        message = (err as Error).message;
      }
      expect(message).toMatch(/ADMIN_API_KEY: /);
      expect(message).not.toContain(key);
    }
  });

  it('accepts 32+ random characters (openssl rand -hex 32 or -hex 16, base64 of 24 random bytes)', () => {
    for (const key of [GOOD_KEY, randomBytes(24).toString('base64url'), 'f3a9c1e07b5d48e2a6c9f0d1b7e4a352']) {
      expect(adminKeyProblem(key), key).toBeUndefined();
      expect(loadConfig({ ADMIN_API_KEY: key }).ADMIN_API_KEY).toBe(key);
    }
  });

  it('is required by npm run api with the 32-character rule in the message', () => {
    expect(() => requireAdminKey(loadConfig({}), 'npm run api')).toThrow(/ADMIN_API_KEY: is required for npm run api \(at least 32 random characters/);
  });
});

describe('secrets from files', () => {
  it('reads <NAME>_FILE (one trailing newline dropped) and names the variable when it cannot', async () => {
    const keyFile = path.join(dir, 'admin_api_key');
    await fs.writeFile(keyFile, `${GOOD_KEY}\n`);
    expect(loadConfig({ ADMIN_API_KEY_FILE: keyFile }).ADMIN_API_KEY).toBe(GOOD_KEY);
    expect(() => loadConfig({ ADMIN_API_KEY_FILE: path.join(dir, 'missing') })).toThrow(/ADMIN_API_KEY_FILE: cannot read .* \(ENOENT\)/);
    expect(() => loadConfig({ ADMIN_API_KEY_FILE: keyFile, ADMIN_API_KEY: GOOD_KEY })).toThrow(/set either ADMIN_API_KEY or ADMIN_API_KEY_FILE, not both/);
  });

  it('puts DATABASE_PASSWORD(_FILE) into DATABASE_URL and the migration password into DATABASE_MIGRATION_URL', async () => {
    const passwordFile = path.join(dir, 'app_password');
    await fs.writeFile(passwordFile, 'app-pw-123\n');
    const config = loadConfig({
      DATABASE_URL: 'postgres://synctide_app@db:5432/synctide',
      DATABASE_PASSWORD_FILE: passwordFile,
      DATABASE_MIGRATION_URL: 'postgres://synctide_owner@db:5432/synctide',
      DATABASE_MIGRATION_PASSWORD: 'owner-pw',
    });
    expect(config.DATABASE_URL).toBe('postgres://synctide_app:app-pw-123@db:5432/synctide');
    expect(config.DATABASE_MIGRATION_URL).toBe('postgres://synctide_owner:owner-pw@db:5432/synctide');
  });

  it('never echoes an invalid secret value', () => {
    const url = 'mysql://user:hunter2-secret@db/x';
    try {
      loadConfig({ DATABASE_URL: url });
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).toMatch(/DATABASE_URL: must be a postgres:\/\//);
      expect((err as Error).message).not.toContain('hunter2');
    }
  });
});

describe('Temporal TLS, mTLS and API key', () => {
  it('uses no TLS and no key by default', () => {
    const config = loadConfig({ TEMPORAL_ADDRESS: 'temporal:7233' });
    expect(temporalSecurity(config)).toEqual({});
    expect(temporalConnectionOptions('temporal:7233', temporalSecurity(config))).toEqual({ address: 'temporal:7233' });
  });

  it('reads the CA, client certificate and key and passes them, the server name and the API key to the connection', async () => {
    const files = { ca: path.join(dir, 'ca.pem'), cert: path.join(dir, 'client.pem'), key: path.join(dir, 'client.key') };
    await fs.writeFile(files.ca, 'CA-PEM');
    await fs.writeFile(files.cert, 'CERT-PEM');
    await fs.writeFile(files.key, 'KEY-PEM');
    const config = loadConfig({
      TEMPORAL_ADDRESS: 'temporal.internal:7233',
      TEMPORAL_TLS_CA: files.ca,
      TEMPORAL_TLS_CERT: files.cert,
      TEMPORAL_TLS_KEY: files.key,
      TEMPORAL_TLS_SERVER_NAME: 'temporal.example.internal',
      TEMPORAL_API_KEY: 'tk-abc',
    });
    const options = temporalConnectionOptions('temporal.internal:7233', temporalSecurity(config));
    expect(options.address).toBe('temporal.internal:7233');
    expect(options.apiKey).toBe('tk-abc');
    expect(options.tls?.serverNameOverride).toBe('temporal.example.internal');
    expect(options.tls?.serverRootCACertificate?.toString()).toBe('CA-PEM');
    expect(options.tls?.clientCertPair?.crt.toString()).toBe('CERT-PEM');
    expect(options.tls?.clientCertPair?.key.toString()).toBe('KEY-PEM');
  });

  it('turns TLS on for an API key alone (never sent in clear text) and for TEMPORAL_TLS=true', () => {
    expect(temporalSecurity(loadConfig({ TEMPORAL_API_KEY: 'tk' }))).toEqual({ tls: {}, apiKey: 'tk' });
    expect(temporalSecurity(loadConfig({ TEMPORAL_TLS: 'true' }))).toEqual({ tls: {} });
  });

  it('refuses a certificate without its key, and a file that is not there, naming the variable', async () => {
    const cert = path.join(dir, 'only.pem');
    await fs.writeFile(cert, 'CERT');
    expect(() => loadConfig({ TEMPORAL_TLS_CERT: cert })).toThrow(/TEMPORAL_TLS_KEY: is required with the other one/);
    expect(() => loadConfig({ TEMPORAL_TLS_CA: path.join(dir, 'nope.pem') })).toThrow(/TEMPORAL_TLS_CA: no readable file there/);
  });
});

describe('pool limits', () => {
  it('gives the API a short statement timeout, the worker and its immediate syncs a long one, all an idle-in-transaction limit', () => {
    const config = loadConfig({});
    expect(poolLimits(config, 'api')).toEqual({ statementTimeoutMs: 30_000, idleInTransactionTimeoutMs: 60_000, applicationName: 'synctide-api' });
    expect(poolLimits(config, 'worker')).toEqual({ statementTimeoutMs: 300_000, idleInTransactionTimeoutMs: 60_000, applicationName: 'synctide-worker' });
    expect(poolLimits(config, 'immediate')).toEqual({ statementTimeoutMs: 300_000, idleInTransactionTimeoutMs: 60_000, applicationName: 'synctide-immediate' });
    // Immediate syncs have a pool of their own, sized by their slots; local activities one of
    // half DATABASE_POOL_MAX (at least 2); the others DATABASE_POOL_MAX.
    expect([poolSize(config, 'api'), poolSize(config, 'worker'), poolSize(config, 'local'), poolSize(config, 'immediate')]).toEqual([10, 10, 5, 8]);
    expect(poolSize(loadConfig({ IMMEDIATE_SYNC_SLOTS: '3', DATABASE_POOL_MAX: '20' }), 'immediate')).toBe(6);
    expect([poolSize(loadConfig({ DATABASE_POOL_MAX: '1' }), 'local'), poolSize(loadConfig({ DATABASE_POOL_MAX: '7' }), 'local')]).toEqual([2, 4]);
    const custom = loadConfig({ API_STATEMENT_TIMEOUT_SECONDS: '5', WORKER_STATEMENT_TIMEOUT_SECONDS: '0', IDLE_IN_TRANSACTION_TIMEOUT_SECONDS: '10' });
    expect(poolLimits(custom, 'api').statementTimeoutMs).toBe(5000);
    expect(poolLimits(custom, 'worker').statementTimeoutMs).toBe(0);
    expect(() => loadConfig({ API_STATEMENT_TIMEOUT_SECONDS: '-1' })).toThrow(/API_STATEMENT_TIMEOUT_SECONDS: must be an integer ≥ 0/);
  });
});

describe('workflow cache', () => {
  const MiB = 2 ** 20;
  it('is sized to the memory limit when WORKER_MAX_CACHED_WORKFLOWS is unset: 50 in 300 MiB, 250 in 768 MiB or without a limit', () => {
    const unset = loadConfig({});
    expect(unset.WORKER_MAX_CACHED_WORKFLOWS).toBeUndefined();
    // Node answers 2^64 (or 0 on some versions) when nothing limits the process.
    expect([workflowCacheSize(unset, 2 ** 64), workflowCacheSize(unset, 0), workflowCacheSize(unset, undefined)]).toEqual([250, 250, 250]);
    expect([300, 356, 400, 512, 768, 4096].map((mib) => workflowCacheSize(unset, mib * MiB))).toEqual([50, 50, 72, 128, 250, 250]);
  });

  it('takes WORKER_MAX_CACHED_WORKFLOWS as given, and refuses what is not an integer ≥ 0, naming it', () => {
    expect(workflowCacheSize(loadConfig({ WORKER_MAX_CACHED_WORKFLOWS: '1200' }), 300 * MiB)).toBe(1200);
    expect(workflowCacheSize(loadConfig({ WORKER_MAX_CACHED_WORKFLOWS: '0' }), 300 * MiB)).toBe(0);
    expect(loadConfig({ WORKER_MAX_CACHED_WORKFLOWS: ' ' }).WORKER_MAX_CACHED_WORKFLOWS).toBeUndefined();
    for (const bad of ['-1', '2.5', 'many']) expect(() => loadConfig({ WORKER_MAX_CACHED_WORKFLOWS: bad })).toThrow(/WORKER_MAX_CACHED_WORKFLOWS: must be an integer ≥ 0/);
  });
});

describe('WORKER_TARGET_CPU', () => {
  it('is 0.7 unless set', () => {
    expect(loadConfig({}).WORKER_TARGET_CPU).toBe(0.7);
    expect(loadConfig({ WORKER_TARGET_CPU: ' ' }).WORKER_TARGET_CPU).toBe(0.7);
    expect(loadConfig({ WORKER_TARGET_CPU: '0.5' }).WORKER_TARGET_CPU).toBe(0.5);
  });

  it('without a LaneGate (a worker not run by `npm run worker`), leaves the scheduled lane fixed slots (100 activities, or the ones given)', () => {
    expect(scheduledSlotOptions({})).toEqual({});
    expect(scheduledSlotOptions({ activitySlots: 8 })).toEqual({ maxConcurrentActivityTaskExecutions: 8 });
  });

  it('with one, keeps fixed activity slots (the gate holds activities back at their start) and takes workflow-task slots from the gate', () => {
    const lanes = new LaneGate(0.7, () => 0);
    const { tuner } = scheduledSlotOptions({ lanes, activitySlots: 8 }) as { tuner: Record<string, any> };
    expect(tuner.activityTaskSlotSupplier).toEqual({ type: 'fixed-size', numSlots: 8 });
    expect(tuner.workflowTaskSlotSupplier).toBeInstanceOf(ScheduledWorkflowTaskSlots);
    expect(tuner.localActivityTaskSlotSupplier).toEqual({ type: 'fixed-size', numSlots: 100 });
  });

  it('refuses what is not a number above 0 and at most 1, naming it', () => {
    expect(loadConfig({ WORKER_TARGET_CPU: '1' }).WORKER_TARGET_CPU).toBe(1);
    for (const bad of ['0', '-0.5', '1.5', '70%', 'high']) {
      expect(() => loadConfig({ WORKER_TARGET_CPU: bad })).toThrow(/WORKER_TARGET_CPU: must be a number above 0 and at most 1/);
    }
  });
});

describe('DEMO_CONNECTOR', () => {
  it('is off unless asked for', () => {
    expect(loadConfig({}).DEMO_CONNECTOR).toBe(false);
    expect(loadConfig({ DEMO_CONNECTOR: 'true' }).DEMO_CONNECTOR).toBe(true);
  });
});

describe('deploy/helm/synctide: Postgres TLS (postgres.sslmode, postgres.caSecret)', () => {
  const CHART = fileURLToPath(new URL('../deploy/helm/synctide/', import.meta.url));
  const chartFile = (file: string) => readFileSync(path.join(CHART, file), 'utf8');
  interface PostgresValues {
    appUser: string;
    ownerUser: string;
    database: string;
    sslmode: string;
    caSecret?: { name: string; key: string };
  }
  const defaults = (parse(chartFile('values.yaml')) as { postgres: PostgresValues }).postgres;

  /**
   * The Postgres URL the chart renders for `user` against 127.0.0.1:`port` (the printf of its
   * URL template applied to `values`), with the CA its container mounts read from `caDir` instead.
   */
  function chartDatabaseUrl(values: PostgresValues, user: string, port: number, caDir = ''): string {
    const helpers = chartFile('templates/_helpers.tpl');
    // Its arguments: user, host, port, database, sslmode.
    const format = /printf "(postgres:\/\/[^"]+)"/.exec(helpers)![1]!;
    const args = [user, '127.0.0.1', port, values.database, values.sslmode];
    let url = format.replace(/%[sv]/g, () => String(args.shift()));
    if (values.caSecret?.name) {
      const [, before, mountDir] = /\{\{- if \$pg\.caSecret\.name \}\}(&sslrootcert=)(\S+)\/\{\{ \$pg\.caSecret\.key \}\}/.exec(helpers)!;
      // The directory the CA is mounted at by every container that connects.
      expect(/- name: postgres-ca\n\s+mountPath: (\S+)/.exec(helpers)![1]).toBe(mountDir);
      url += `${before}${caDir}/${values.caSecret.key}`;
    }
    return url;
  }

  it('builds every Postgres URL (API, workers, migrate Job) with that one template', () => {
    const templates = readdirSync(path.join(CHART, 'templates')).map((file) => [file, chartFile(`templates/${file}`)] as const);
    const urls = templates.flatMap(([file, text]) => [...text.matchAll(/name: (DATABASE(?:_MIGRATION)?_URL)\n\s+value: (.*)/g)].map((m) => [file, m[1], m[2]]));
    expect(urls).toEqual([
      ['_helpers.tpl', 'DATABASE_URL', '{{ include "synctide.databaseUrl" (dict "root" . "user" .Values.postgres.appUser) | quote }}'],
      ['migrate-job.yaml', 'DATABASE_MIGRATION_URL', '{{ include "synctide.databaseUrl" (dict "root" . "user" .Values.postgres.ownerUser) | quote }}'],
    ]);
    expect(templates.filter(([, text]) => text.includes('sslmode=')).map(([file]) => file)).toEqual(['_helpers.tpl']);
  });

  /** A Postgres whose certificate `ca` signed, and what it saw of each client: `tls` once the handshake succeeded, `startup` once a startup message came over it. */
  let server: net.Server;
  let port: number;
  let dir: string;
  const seen: string[] = [];

  /** A self-signed certificate for 127.0.0.1 (its own CA), in `dir`/`name`.{key,crt}. */
  async function selfSigned(name: string): Promise<{ key: Buffer; cert: Buffer; crt: string }> {
    const key = path.join(dir, `${name}.key`);
    const crt = path.join(dir, `${name}.crt`);
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', crt, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    return { key: await fs.readFile(key), cert: await fs.readFile(crt), crt };
  }

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-pg-tls-'));
    // A certificate no public CA signed (RDS, Cloud SQL, an in-cluster operator's own CA).
    const { key, cert } = await selfSigned('server');
    await fs.mkdir(path.join(dir, 'ca'));
    await fs.copyFile(path.join(dir, 'server.crt'), path.join(dir, 'ca', 'ca.crt'));
    await selfSigned('other');
    await fs.mkdir(path.join(dir, 'other-ca'));
    await fs.copyFile(path.join(dir, 'other.crt'), path.join(dir, 'other-ca', 'ca.crt'));
    server = net.createServer((socket) => {
      socket.once('data', (first) => {
        // SSLRequest: length 8, code 80877103.
        if (first.length !== 8 || first.readInt32BE(4) !== 80877103) return socket.destroy();
        socket.write('S');
        const secure = new tls.TLSSocket(socket, { isServer: true, key, cert });
        secure.on('secure', () => seen.push('tls'));
        secure.on('error', () => undefined);
        secure.once('data', () => {
          seen.push('startup');
          // ErrorResponse: the test only needs to know the client got this far.
          const fields = Buffer.from('SFATAL\0C28000\0Mstartup reached\0\0');
          const msg = Buffer.alloc(5 + fields.length);
          msg.write('E', 0);
          msg.writeInt32BE(4 + fields.length, 1);
          fields.copy(msg, 5);
          secure.end(msg);
        });
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** Connects as a process of the chart does (DATABASE_URL and DATABASE_PASSWORD_FILE through the configuration); the error, or null. */
  async function connect(url: string): Promise<Error | null> {
    seen.length = 0;
    const passwordFile = path.join(dir, 'database-password');
    await fs.writeFile(passwordFile, 'app-password\n');
    const config = loadConfig({ DATABASE_URL: url, DATABASE_PASSWORD_FILE: passwordFile });
    const pool = createPool(config.DATABASE_URL!, 1);
    try {
      await pool.query('select 1');
      return null;
    } catch (err) {
      return err as Error;
    } finally {
      await pool.end();
    }
  }

  it('the default `require` encrypts without verifying the server certificate, as the libpq sslmode values.yaml documents', async () => {
    expect(chartFile('values.yaml')).toMatch(/libpq sslmode/);
    expect(defaults.sslmode).toBe('require');
    expect(defaults.caSecret?.name ?? '').toBe('');
    for (const user of [defaults.appUser, defaults.ownerUser]) {
      const url = chartDatabaseUrl(defaults, user, port);
      expect(url).toContain('sslmode=require');
      const error = await connect(url);
      // With libpq's `require` the client accepts the certificate and sends its startup message
      // (which this fake refuses); node-postgres's own reading verifies it and gives up in the handshake.
      expect(error?.message, url).not.toMatch(/certificate/i);
      expect(seen, url).toEqual(['tls', 'startup']);
    }
  });

  it('verify-full and verify-ca with postgres.caSecret accept a server certificate that CA signed, and refuse one it did not', async () => {
    for (const sslmode of ['verify-full', 'verify-ca']) {
      const values = { ...defaults, sslmode, caSecret: { name: 'postgres-ca', key: 'ca.crt' } };
      const url = chartDatabaseUrl(values, defaults.appUser, port, path.join(dir, 'ca'));
      expect(await connect(url).then((err) => err?.message), url).toMatch(/startup reached/);
      expect(seen, url).toEqual(['tls', 'startup']);

      const wrong = chartDatabaseUrl(values, defaults.appUser, port, path.join(dir, 'other-ca'));
      expect((await connect(wrong))?.message, wrong).toMatch(/certificate/i);
      expect(seen, wrong).not.toContain('startup');
    }
  });
});
