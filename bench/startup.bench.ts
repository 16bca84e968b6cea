// Figures for the local stack's foundations: embedded Postgres cold start (initdb + start), warm
// start, and applying every migration to an empty database.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createDatabaseIfMissing } from '../infra/database';
import { startEmbeddedPostgres } from '../infra/embedded-postgres';
import { migrate } from '../db/migrate';
import { freePort } from '../lib/ports';

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-bench-'));
await fs.chmod(dir, 0o755);
const port = await freePort();
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;

let t = process.hrtime.bigint();
let server = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), port });
const cold = ms(t);
await server.stop();
t = process.hrtime.bigint();
server = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), port });
const warm = ms(t);

const runs: number[] = [];
for (let i = 0; i < 5; i++) {
  await createDatabaseIfMissing(server.adminUrl, `bench_${i}`);
  t = process.hrtime.bigint();
  await migrate(server.urlFor(`bench_${i}`));
  runs.push(ms(t));
}
t = process.hrtime.bigint();
await migrate(server.urlFor('bench_0'));
const noop = ms(t);
await server.stop();
await fs.rm(dir, { recursive: true, force: true });

runs.sort((a, b) => a - b);
console.log(`embedded postgres cold start (initdb + start): ${cold.toFixed(0)} ms`);
console.log(`embedded postgres warm start:                 ${warm.toFixed(0)} ms`);
console.log(`all migrations on an empty database (median of 5): ${runs[2]!.toFixed(0)} ms`);
console.log(`migrate when up to date:                       ${noop.toFixed(0)} ms`);
