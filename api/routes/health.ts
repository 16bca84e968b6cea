import { Hono } from 'hono';
import type { ApiDeps } from '../deps';

const CHECK_TIMEOUT_MS = 2000;

async function probe(check: () => Promise<unknown>): Promise<'ok' | string> {
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
    // The reason stays in the server log; the probe answer says only that it is unreachable.
    return 'unreachable';
  } finally {
    clearTimeout(timer);
  }
}

/** `GET /healthz` (the process is up) and `GET /readyz` (Postgres and Temporal answer). */
export function healthRoutes(deps: ApiDeps): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const [postgres, temporal] = await Promise.all([
      probe(() => deps.pool.query('select 1')),
      probe(() => deps.temporal.connection.workflowService.getSystemInfo({})),
    ]);
    const ready = postgres === 'ok' && temporal === 'ok';
    return c.json({ status: ready ? 'ok' : 'unavailable', checks: { postgres, temporal } }, ready ? 200 : 503);
  });
  return app;
}
