// How the image runs a process: its command (the package.json `start:*` script, which the
// Dockerfile's CMD, compose and the Helm chart repeat in exec form) and the environment its runtime
// stage sets (the Dockerfile's `ENV NAME=value` lines after its last FROM). Benches and the
// production-shape test start the production processes with both, so they run as the image runs
// them (the worker's Node flags, MALLOC_ARENA_MAX, NODE_ENV, the bundle's path).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The image's command of `script` in exec form (`node`, its flags, the dist/ entry). */
export function imageCommand(script: 'start:api' | 'start:worker' | 'start:migrate'): string[] {
  const { scripts } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  return scripts[script]!.split(' ');
}

/** The runtime stage's `ENV NAME=value` pairs (one pair a line, as the Dockerfile writes them). */
export function imageEnv(): Record<string, string> {
  const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  return Object.fromEntries([...runtime.matchAll(/^ENV (\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}
