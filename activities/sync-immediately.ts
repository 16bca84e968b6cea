import { Context } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import { pagesOf } from '../connectors/pages';
import { getConnector } from '../connectors/registry';
import { Permanent, RateLimited } from '../connectors/types';
import { findSyncBlockers, findSyncSource } from '../db/models/connections';
import { fetchTime, upsertRecords } from '../db/models/records';
import { findCursors } from '../db/models/state';
import { withTransaction } from '../db/transaction';
import type { Activities } from '../temporal/activities';
import type { ImmediateSyncProgress, ImmediateSyncResult, ResourceCounts } from '../temporal/immediate-sync';
import { toActivityFailure } from '../services/connector-failure';
import { credentialProvider, withCurrentCredential } from './credential-provider';
import { requestBudget } from '../services/rate-budget';
import { DEFAULT_BUDGET_SETTINGS } from '../policy/rate-budget';
import type { ActivityDeps } from './deps';
import { HEARTBEAT_EVERY_MS } from './heartbeat';
import { storeUnderCurrentConfig } from './selected-now';

/**
 * Immediate mode: runs the sync of a connection now and returns per-resource counts, creating no
 * `sync_jobs` or `sync_tasks` rows. Records are upserted as in a job; an incremental run reads
 * the cursors but does not move them, and nothing is deleted, so the scheduled jobs' bookkeeping
 * stays exactly as it was. After each stored page it heartbeats the counts so far (what a caller
 * whose deadline passed reports), and also every 2 s while a request is in flight, so a
 * cancellation reaches it within seconds and aborts the provider request itself (through the
 * cancellation signal), not only at the next page. Provider requests and paging are bounded by
 * the worker's provider policy.
 */
export function syncImmediately(deps: ActivityDeps): Activities['syncImmediately'] {
  const { pool, metrics, providers } = deps;
  return async (input) => {
    const ctx = Context.current();
    let provider: string | undefined;
    // The credential values every error of the provider calls is redacted with.
    let secrets: () => readonly string[] = () => [];
    let progress: ImmediateSyncProgress = { resources: [] };
    const beat = setInterval(() => ctx.heartbeat(progress), HEARTBEAT_EVERY_MS);
    try {
      const conn = await findSyncSource(pool, input.connectionId);
      if (!conn) throw new Error(`connection ${input.connectionId} does not exist`);
      // Its request was checked before this run started: a deletion or disable since ends it here,
      // before any provider request (a purge's quiesce may have looked before this run existed).
      const blockers = await findSyncBlockers(pool, input.connectionId, new Date());
      if (blockers.purge_id !== null || blockers.status !== 'active') {
        const why = blockers.purge_id !== null ? 'is being deleted' : `is ${blockers.status ?? 'gone'}`;
        throw new Permanent(`connection ${input.connectionId} ${why}: not synced`);
      }
      provider = conn.provider_slug;
      // The connector asks for the current credential with every request (see credential-provider.ts).
      const source = credentialProvider(deps, input.connectionId, conn.credentials, conn.oauth_grant_id, conn.config);
      secrets = () => source.secrets();
      const connector = withCurrentCredential(getConnector(conn.provider_slug), source);
      const resourceTypes = input.resourceTypes?.length ? input.resourceTypes : connector.resourceTypes(conn.config ?? {});
      const result: ImmediateSyncResult = { connectionId: input.connectionId, mode: input.mode, resources: [] };
      for (const resourceType of resourceTypes) {
        // Per partition, as a job's incremental pass (connectors/types.ts: a partition without a cursor is read from nothing).
        const cursors = input.mode === 'incremental' ? await findCursors(pool, input.connectionId, resourceType) : undefined;
        const counts: ResourceCounts = { resourceType, entityCount: 0, writtenCount: 0, pages: 0 };
        result.resources.push(counts);
        // The budget is keyed by the tenant and the opened credential's fingerprint, so a tenant's
        // connections sharing a token share its budget (an OAuth 2 grant: by the grant).
        const request = {
          resource: resourceType,
          since: cursors?.get('') ?? null,
          ...(cursors && { cursors }),
          until: null,
          config: conn.config ?? {},
          credentials: null,
          signal: ctx.cancellationSignal,
          policy: providers,
          budget: requestBudget({
            pool, metrics, keyring: deps.credentials, settings: deps.connectors?.rateBudget ?? DEFAULT_BUDGET_SETTINGS,
            maxResetSeconds: deps.connectors?.maxResetSeconds, tenantId: conn.tenant_id, connectionId: input.connectionId,
            provider: conn.provider_slug, credentials: source.budgetKey, config: conn.config ?? {},
          }),
        };
        for await (const page of pagesOf(connector, request, null, undefined, secrets, () => fetchTime(pool))) {
          const { counts: written } = await withTransaction(pool, (tx) => {
            const target = { connectionId: input.connectionId, resourceType, jobId: null, fetchedAt: page.fetchedAt, readEpoch: conn.config_epoch };
            // Under the config this run read, or, changed since, only what it selects now (in the same transaction).
            return storeUnderCurrentConfig(
              { connector, connectionId: input.connectionId, resourceType, records: page.records, configEpoch: conn.config_epoch },
              (db, records, configEpoch) => upsertRecords(db, { ...target, ...(configEpoch !== undefined && { configEpoch }) }, records),
              { first: (store) => store(tx), again: (store) => store(tx) },
            );
          });
          counts.writtenCount += written.added + written.updated;
          counts.entityCount += page.records.length;
          counts.pages += 1;
          progress = structuredClone({ resources: result.resources }) satisfies ImmediateSyncProgress;
          ctx.heartbeat(progress);
        }
      }
      return result;
    } catch (err) {
      if (ctx.cancellationSignal.aborted) throw new CancelledFailure('immediate sync cancelled');
      // One provider rate limit, one count: the failure is not retried (see toActivityFailure).
      if (err instanceof RateLimited && provider !== undefined) metrics.rateLimited.inc({ provider });
      throw toActivityFailure(err, secrets(), deps.connectors?.maxResetSeconds);
    } finally {
      clearInterval(beat);
    }
  };
}
