import type { Client } from '@temporalio/client';
import { migrate } from '../db/migrate';
import { createPool, type Pool } from '../db/pool';
import type { Config } from './config';
import type { Logger } from './logger';
import type { Shutdown } from './shutdown';
import { connectTemporal } from './temporal-connection';

/**
 * What every Synctide process does first: apply pending migrations, open the pool and the one
 * Temporal client, and register both for shutdown.
 */
export async function connectServers(
  opts: { databaseUrl: string; temporalAddress: string; config: Config; logger: Logger; shutdown: Shutdown },
): Promise<{ pool: Pool; temporal: Client }> {
  const { config, logger, shutdown } = opts;
  const applied = await migrate(opts.databaseUrl, (msg) => logger.debug({ component: 'migrate' }, msg));
  logger.info({ applied }, 'database ready');
  const pool = createPool(opts.databaseUrl, config.DATABASE_POOL_MAX);
  shutdown.add('pool', () => pool.end());
  const temporal = await connectTemporal(opts.temporalAddress, config.TEMPORAL_NAMESPACE);
  shutdown.add('temporal-client', () => temporal.connection.close());
  return { pool, temporal };
}
