import type { Client } from '@temporalio/client';
import type { Registry } from 'prom-client';
import type { Pool } from '../db/pool';
import type { Logger } from '../lib/logger';

/** What the API needs from the process: one pool, one Temporal client, one metrics registry. */
export interface ApiDeps {
  pool: Pool;
  temporal: Client;
  registry: Registry;
  logger: Logger;
}
