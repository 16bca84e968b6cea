// A server this process started as a child (Postgres, the Temporal dev server): its output passed
// on line by line, with its last lines kept for the error that says why it did not start, and its
// stop.
import type { ChildProcess } from 'node:child_process';

/**
 * Follows `child`'s stdout and stderr: every line that is not blank goes to `onLog`, and the last
 * `keep` of them stay in the returned array (it fills as the child writes).
 */
export function followOutput(child: ChildProcess, keep: number, onLog?: (line: string) => void): string[] {
  const tail: string[] = [];
  const onData = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      tail.push(line);
      if (tail.length > keep) tail.shift();
      onLog?.(line);
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  return tail;
}

/**
 * When `child` is done: `exited` resolves once it exited, or once it could not be run at all (a
 * binary that cannot be run emits `error` and never `exit`), and `spawnError` then says why.
 */
export function watchExit(child: ChildProcess): { exited: Promise<void>; spawnError: () => Error | undefined } {
  let spawnError: Error | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', (err) => {
      spawnError = err;
      resolve();
    });
  });
  return { exited, spawnError: () => spawnError };
}

/**
 * Stops `child` with `signal`, and with SIGKILL if it still runs `graceMs` later; resolves when it
 * exited (`exited`), at once when it already had.
 */
export async function stopChild(child: ChildProcess, exited: Promise<void>, signal: NodeJS.Signals, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}
