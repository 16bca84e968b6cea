// The `synctide` process: runs the command line with the real streams and environment, Ctrl-C
// aborting the request in flight and what waits or follows (a second Ctrl-C exits at once), a
// closed output pipe ending it with exit 0, and exits with its code.
import { run } from './run';

const controller = new AbortController();
process.on('SIGINT', () => {
  if (controller.signal.aborted) process.exit(130);
  controller.abort();
});

// A reader of the output that went away (`synctide records tail --json | head -1`) ends the
// command quietly: nothing more can be shown, and that is no failure of the command.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

const code = await run(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env, signal: controller.signal });
// Let stdout drain (a pipe may still hold output) before the exit code is set.
process.exitCode = code;
