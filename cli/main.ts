// The `synctide` process: runs the command line with the real streams and environment, Ctrl-C
// aborting the request in flight and what waits or follows (a second Ctrl-C exits at once), and
// exits with its code.
import { run } from './run';

const controller = new AbortController();
process.on('SIGINT', () => {
  if (controller.signal.aborted) process.exit(130);
  controller.abort();
});

const code = await run(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env, signal: controller.signal });
// Let stdout drain (a pipe may still hold output) before the exit code is set.
process.exitCode = code;
