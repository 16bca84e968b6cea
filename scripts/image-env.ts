// The environment the image's runtime stage sets: its `ENV NAME=value` lines after the Dockerfile's
// last FROM. Benches and the production-shape test start the production commands with it, so they
// run as the image runs them (MALLOC_ARENA_MAX, NODE_ENV, the bundle's path).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const DOCKERFILE = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'Dockerfile');

/** The runtime stage's `ENV NAME=value` pairs (one pair a line, as the Dockerfile writes them). */
export function imageEnv(): Record<string, string> {
  const dockerfile = readFileSync(DOCKERFILE, 'utf8');
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  return Object.fromEntries([...runtime.matchAll(/^ENV (\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}
