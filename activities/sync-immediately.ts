import { getConnector } from '../connectors/registry';
import { upsertRecords } from '../db/upsert-records';
import { withTransaction } from '../db/transaction';
import { toActivityFailure } from './connector-failure';
import type { ActivityDeps } from './deps';

/** Per-resource counts of an immediate sync. */
export interface ImmediateSyncResult {
  connectionId: string;
  mode: 'incremental' | 'full';
  resources: { resourceType: string; entityCount: number; writtenCount: number; pages: number }[];
}

/**
 * Immediate mode (seed 003): runs the sync of a connection now and returns per-resource counts,
 * creating no `sync_jobs` or `sync_tasks` rows. Records are upserted as in a job; an incremental
 * run reads the cursors but does not move them, and nothing is deleted, so the scheduled jobs'
 * bookkeeping stays exactly as it was.
 */
export function syncImmediately({ pool }: ActivityDeps) {
  return async (input: {
    connectionId: string;
    mode: 'incremental' | 'full';
    resourceTypes?: string[];
  }): Promise<ImmediateSyncResult> => {
    try {
      const { rows } = await pool.query(
        `select provider_slug, config, credentials from connections where id = $1`,
        [input.connectionId],
      );
      const conn = rows[0];
      if (!conn) throw new Error(`connection ${input.connectionId} does not exist`);
      const connector = getConnector(conn.provider_slug);
      const resourceTypes = input.resourceTypes?.length ? input.resourceTypes : connector.resourceTypes(conn.config ?? {});
      const result: ImmediateSyncResult = { connectionId: input.connectionId, mode: input.mode, resources: [] };
      for (const resourceType of resourceTypes) {
        const state = await pool.query(
          'select cursor from sync_state where connection_id = $1 and resource_type = $2',
          [input.connectionId, resourceType],
        );
        const since: Date | null = input.mode === 'incremental' ? (state.rows[0]?.cursor ?? null) : null;
        let pageToken: string | null = null;
        const counts = { resourceType, entityCount: 0, writtenCount: 0, pages: 0 };
        do {
          const page = await connector.fetchPage({
            resource: resourceType,
            since,
            pageToken,
            config: conn.config ?? {},
            credentials: conn.credentials ?? null,
          });
          counts.writtenCount += await withTransaction(pool, (tx) =>
            upsertRecords(tx, { connectionId: input.connectionId, resourceType, jobId: null, at: new Date() }, page.records),
          );
          counts.entityCount += page.records.length;
          counts.pages += 1;
          pageToken = page.nextPageToken;
        } while (pageToken);
        result.resources.push(counts);
      }
      return result;
    } catch (err) {
      throw toActivityFailure(err);
    }
  };
}
