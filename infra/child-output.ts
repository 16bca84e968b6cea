// The output of a child process this process started (Postgres, the Temporal dev server): passed
// on line by line, with its last lines kept for the error that says why the child did not start.
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
