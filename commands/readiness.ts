import { ping } from '../db/pool';
import type { CommandDeps } from './deps';

const CHECK_TIMEOUT_MS = 2000;

/** Whether a dependency answered: `ok`, or `unreachable` (the reason stays in the server log). */
export type Check = 'ok' | 'unreachable';

/** Readiness of a process: can it reach Postgres and Temporal, each within 2 s? */
export async function checkReadiness(deps: Pick<CommandDeps, 'pool' | 'temporal'>): Promise<{ ready: boolean; checks: { postgres: Check; temporal: Check } }> {
  const [postgres, temporal] = await Promise.all([
    probe(() => ping(deps.pool)),
    probe(() => deps.temporal.connection.workflowService.getSystemInfo({})),
  ]);
  return { ready: postgres === 'ok' && temporal === 'ok', checks: { postgres, temporal } };
}

async function probe(check: () => Promise<unknown>): Promise<Check> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
      }),
    ]);
    return 'ok';
  } catch {
    return 'unreachable';
  } finally {
    clearTimeout(timer);
  }
}
