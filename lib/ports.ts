import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

// Ports handed out for later use are drawn below Linux's default ephemeral range (32768–60999):
// a port the OS picked from that range and released can be taken by any outgoing connection's
// local end before its new owner binds it (a fresh-clone CI run lost `npm start` to that:
// EADDRINUSE seconds after the port was found free, while other tests opened connections).
const LOW = 20_000;
const HIGH = 32_767;
const TRIES = 50;

// A port found free is not bound until its server starts, maybe seconds later and in another
// process: until then another draw could find it free too (one process drawing 500 ports got
// 5 twice; two test files drawing side by side got one twice and the Temporal UI failed to bind
// it). So each port handed out is claimed for the drawing process's life by a file named after
// it, holding the process's id; a claim whose process has exited is taken over. One directory per
// user: another user's claims could be neither read nor taken over.
const CLAIMS = path.join(os.tmpdir(), `synctide-ports-${process.getuid?.() ?? 'user'}`);
/** Made once per process, on the first draw. */
let claimsDir: Promise<unknown> | undefined;

/** Whether 127.0.0.1:`port` can be listened on now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Creates the claim file whole (written aside, then linked: a reader never sees it empty). */
async function createClaim(file: string): Promise<boolean> {
  const draft = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.draft`;
  await fs.writeFile(draft, String(process.pid));
  try {
    await fs.link(draft, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    await fs.rm(draft, { force: true });
  }
}

/**
 * Claims `port` for this process: false when a live process (this one included) holds it.
 * A dead holder's claim is moved aside before the new one is made, and the one moved is checked
 * to be the dead holder's: of two processes taking over one claim at once, one goes on.
 */
async function claim(port: number): Promise<boolean> {
  const file = path.join(CLAIMS, String(port));
  if (await createClaim(file)) return true;
  const holder = Number(await fs.readFile(file, 'utf8').catch(() => '0'));
  if (holder > 0 && isAlive(holder)) return false;
  const aside = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.stale`;
  try {
    await fs.rename(file, aside);
  } catch {
    return false;
  }
  const moved = Number(await fs.readFile(aside, 'utf8').catch(() => '0'));
  if (moved !== holder) {
    // Another process took the claim over between the read and the move: give it back.
    await fs.link(aside, file).catch(() => undefined);
    await fs.rm(aside, { force: true });
    return false;
  }
  await fs.rm(aside, { force: true });
  return createClaim(file);
}

/** A port the OS picks from the ephemeral range, for a server this process binds at once. */
export function ephemeralPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * A free TCP port on 127.0.0.1 for a server started later, maybe by another process: random below
 * the ephemeral range, free now, and handed out by no other draw while this process lives.
 */
export async function freePort(): Promise<number> {
  await (claimsDir ??= fs.mkdir(CLAIMS, { recursive: true }));
  for (let i = 0; i < TRIES; i++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW + 1));
    if ((await canListen(port)) && (await claim(port))) return port;
  }
  throw new Error(`no free port found below ${HIGH + 1} in ${TRIES} tries`);
}
