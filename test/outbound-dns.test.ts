// How outbound requests resolve names: a name server that never answers one tenant's names holds
// back no other name's resolution in the process. Run against a real name server on 127.0.0.1 in
// network and mount namespaces of the test's own (unshare), whose /etc/resolv.conf names it.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Fails, naming what is missing, when this machine does not let a process have network and mount
 * namespaces of its own (`unshare -rmn`): the test needs them and is never skipped.
 */
function requireNamespaces(): void {
  try {
    execFileSync('unshare', ['-rmn', 'true'], { stdio: 'ignore' });
  } catch (err) {
    throw new Error(`this test needs network and mount namespaces (unshare -rmn): ${(err as Error).message}`);
  }
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** A public address, held by the loopback of the test's own network namespace only. */
const RECEIVER_ADDRESS = '93.184.215.14';

/** Runs test/fixtures/dns-stall.ts in its namespaces: the requests it made, in the order they settled. */
async function runStall(): Promise<{ host: string; status?: number; error?: string }[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'synctide-dns-'));
  const resolvConf = path.join(dir, 'resolv.conf');
  writeFileSync(resolvConf, 'nameserver 127.0.0.1\n');
  const script = `ip link set lo up && ip addr add "$1"/32 dev lo && mount --bind "$2" /etc/resolv.conf && exec "$3" --import tsx test/fixtures/dns-stall.ts "$1"`;
  const child = spawn('unshare', ['-rmn', 'sh', '-c', script, 'sh', RECEIVER_ADDRESS, resolvConf, process.execPath], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  rmSync(dir, { recursive: true, force: true });
  expect(code, err).toBe(0);
  return out.trim().split('\n').map((line) => JSON.parse(line) as { host: string; status?: number; error?: string });
}

describe('outbound name resolution', () => {
  it(
    "a name server that never answers one tenant's names holds back no other request: another name is resolved and answered first, and the never-answered ones fail by the resolver's own bound",
    async () => {
      requireNamespaces();
      const settled = await runStall();
      expect(settled).toHaveLength(5);
      expect(settled[0]).toEqual({ host: 'receiver.example.com', status: 200 });
      for (const request of settled.slice(1)) expect(request).toEqual({ host: expect.stringMatching(/never-answers/), error: 'host not found or not allowed' });
    },
    60_000,
  );
});
