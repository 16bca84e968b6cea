// `npm run migrate` started beside a Postgres that does not accept connections yet (compose,
// Kubernetes) waits for it, bounded and saying so, instead of failing the deploy.
import { readdirSync } from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isNotYetReachable, MIGRATIONS_DIR, migrateWhenReachable } from '../db/migrate';
import { freePort } from '../lib/ports';
import { createEmptyDatabase, dropDatabase } from './helpers/database';

let url: string;
beforeAll(async () => {
  url = await createEmptyDatabase();
});
afterAll(async () => {
  await dropDatabase(url);
});

/** A TCP forwarder from 127.0.0.1:`port` to the database server of `target`. */
function forward(port: number, target: URL): Promise<net.Server> {
  const server = net.createServer((inbound) => {
    const outbound = net.connect(Number(target.port || 5432), target.hostname);
    inbound.pipe(outbound).pipe(inbound);
    const close = () => (inbound.destroy(), outbound.destroy());
    inbound.on('error', close);
    outbound.on('error', close);
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

describe('migrateWhenReachable', () => {
  it('waits for Postgres to accept connections, reporting each wait, then migrates', async () => {
    const port = await freePort();
    const target = new URL(url);
    const viaProxy = new URL(url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(port);
    let proxy: Promise<net.Server> | undefined;
    const waits: { attempt: number; error: string }[] = [];
    const applied = await migrateWhenReachable(viaProxy.toString(), {
      timeoutMs: 120_000,
      retryMs: 100,
      // Postgres "comes up" only once the first wait was reported.
      onWait: (info) => {
        waits.push(info);
        proxy ??= forward(port, target);
      },
    });
    expect(waits[0]!.attempt).toBe(1);
    expect(waits[0]!.error).toMatch(/ECONNREFUSED/);
    // Every migration was applied to the empty database.
    expect(applied.length).toBe(readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql')).length);
    (await proxy!).close();
  });

  it('gives up after its bound, and fails at once on an error waiting cannot mend', async () => {
    const nowhere = new URL(url);
    nowhere.hostname = '127.0.0.1';
    nowhere.port = String(await freePort());
    let waits = 0;
    await expect(migrateWhenReachable(nowhere.toString(), { timeoutMs: 300, retryMs: 50, onWait: () => void waits++ })).rejects.toThrow(/^gave up waiting for Postgres after \d+ s/);
    expect(waits).toBeGreaterThan(0);

    const wrongPassword = new URL(url);
    wrongPassword.password = 'not-the-password';
    waits = 0;
    const refused = migrateWhenReachable(wrongPassword.toString(), { timeoutMs: 60_000, retryMs: 50, onWait: () => void waits++ });
    await expect(refused).rejects.toThrow();
    await refused.catch((err: unknown) => expect(isNotYetReachable(err)).toBe(false));
    expect(waits).toBe(0);
  });
});
