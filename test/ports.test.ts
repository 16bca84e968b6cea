// freePort hands a port to a server started later, often by another process. Test files run side
// by side in separate processes, each drawing ports for its servers: no port may go to two of them
// while both live, or one server's bind fails (a fresh-clone fault run lost `npm start` that way:
// the Temporal UI port was "already in use" when the dev server bound it).
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ephemeralPort } from '../lib/ports';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PICKS = 500;

/** A process that draws `PICKS` ports with freePort, prints them, and lives until stdin closes. */
function picker(): { child: ChildProcess; ports: Promise<number[]> } {
  const script = `
    import { freePort } from './lib/ports.ts';
    const ports = [];
    for (let i = 0; i < ${PICKS}; i++) ports.push(await freePort());
    process.stdout.write(JSON.stringify(ports) + '\\n');
    process.stdin.resume();
    process.stdin.on('end', () => process.exit(0));
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  const ports = new Promise<number[]>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(JSON.parse(out) as number[]);
    });
    child.once('exit', (code) => reject(new Error(`picker exited (${code}) before printing its ports`)));
  });
  return { child, ports };
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.stdin?.end();
});

describe('freePort', () => {
  it('never hands one port to two live processes, nor twice to one (500 draws each)', async () => {
    const a = picker();
    children.push(a.child);
    const first = await a.ports;
    // The second draws while the first still lives and none of the first's ports is bound.
    const b = picker();
    children.push(b.child);
    const second = await b.ports;

    expect(first).toHaveLength(PICKS);
    expect(new Set(first).size).toBe(PICKS);
    expect(new Set(second).size).toBe(PICKS);
    expect(first.filter((port) => second.includes(port))).toEqual([]);
    // Drawn below the ephemeral range, where outgoing connections never take a port.
    expect(Math.max(...first, ...second)).toBeLessThan(32_768);
  });

  it('hands the ports of a process that has exited to the next one', async () => {
    const a = picker();
    children.push(a.child);
    const first = await a.ports;
    a.child.stdin!.end();
    await new Promise((resolve) => a.child.once('exit', resolve));
    const b = picker();
    children.push(b.child);
    const second = await b.ports;
    // Two random draws of 500 from 12,768 ports share about 20; none would if the first's claims
    // outlived it (the chance of no overlap by luck is about 3 in a billion).
    expect(first.filter((port) => second.includes(port)).length).toBeGreaterThan(0);
  });
});

describe('ephemeralPort', () => {
  it('is drawn by the OS from the ephemeral range, apart from the ports freePort hands out', async () => {
    const port = await ephemeralPort();
    expect(port).toBeGreaterThanOrEqual(32_768);
  });
});
