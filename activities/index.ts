import type { Pool } from '../db/pool';
import type { Logger } from '../lib/logger';

/** What activities need from the worker process. */
export interface ActivityDeps {
  pool: Pool;
  logger: Logger;
}

/** All Synctide activities, bound to the worker's dependencies. */
export function createActivities(deps: ActivityDeps) {
  void deps;
  return {};
}

/** The activity interface workflows proxy with `proxyActivities<Activities>()`. */
export type Activities = ReturnType<typeof createActivities>;
