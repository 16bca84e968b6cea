import type { PoolClient } from 'pg';
import { connectorSlugs, getConnector } from '../connectors/registry';
import { reselected } from '../connectors/selection';
import { lockConfigForShare } from '../db/models/connections';
import { findOpenPurgeLocked, findOpenPurgeLockedNoWait } from '../db/models/purges';
import { advanceDeselection, findDeselectionsToFinish, forgetDeselections, lockDeselection, type DeselectionToFinish, type DeselectionTurnsStart } from '../db/models/deselections';
import { DESELECTION_BATCH, lockChangeFeed, tombstoneDeselectedBatch, tryLockChangeFeed } from '../db/models/records';
import { withTransaction } from '../db/transaction';
import type { ActivityDeps } from './deps';

/** Batches of deselected records one reconcile tick tombstones at most (the rest at the next tick). */
export const DESELECTION_BATCHES_PER_TICK = 50;

/**
 * The tenant each pool's process gave its last deselection batch to: the next tick's turns start
 * after it. Kept in the process (one entry per pool, so one per worker), not in the database.
 */
const lastServed = new WeakMap<object, string>();

/** What one call of `finishDeselections` did. */
export interface DeselectionProgress {
  /** Records tombstoned. */
  tombstoned: number;
  /** Pending deselections finished (or found selected again) and deleted. */
  finished: number;
  /** Batches run; at most `batches` of the call. */
  batches: number;
}

/**
 * The reconcile tick's step that finishes what config changes stopped selecting
 * (`pending_deselections`, written by `updateConnection` in commands/connections.ts): up to
 * `batches` batches of DESELECTION_BATCH records visited, each batch its own transaction so no
 * lock is held for long and progress survives a failure midway. The batches go to tenants in
 * turns (`takeTurns`): each tenant with pending deselections has one batch of its oldest in each
 * round, so one tenant's large or many deselections cannot keep another tenant's deselected
 * records live for tick after tick; within a tenant, oldest first, each to its end. With more
 * tenants than `batches` not all have a turn in one tick, so the turns go on across ticks: a tick
 * starts with the tenant after the one the process served last (tenants in id order, wrapping
 * round), so every tenant with pending work has a batch within ceil(tenants / batches) ticks of
 * one process. A process that has served none yet (just started, or the tick's activity ran on
 * another worker until now) starts at position floor(at / tick) * batches of that order instead,
 * which moves on by a tick's batches each tick, so ticks run by fresh processes rotate too. A batch
 * takes the connection's purge lock shared, its change-feed lock (the order of a config change; a
 * page's store takes the feed lock first too), then the deselection's row: one that a later config
 * change forgot (it selected the unit again) or that another tick finished is left alone. The
 * tick waits for no tenant's locks while another batch can run: a batch whose connection's purge
 * or feed lock another transaction holds (a long page store, a config change, a deletion being
 * recorded) is passed by for that round, the tenant's turn going to its next unit, and only a
 * round in which every unit left was passed by waits for their locks, one after another. A batch
 * reads the config under a share lock and tombstones only records the config does not select now,
 * from where the last batch stopped; a batch that visits fewer than its limit has reached the end
 * and deletes the row. Only connections of providers this worker knows (the others' records
 * cannot be judged). Idempotent: a batch run twice tombstones nothing twice (a tombstone is not
 * live). Connections whose purge is open are left to the purge.
 */
export async function finishDeselections(
  deps: Pick<ActivityDeps, 'pool' | 'logger' | 'reconcile'>,
  batches = DESELECTION_BATCHES_PER_TICK,
  at = Date.now(),
): Promise<DeselectionProgress> {
  const progress: DeselectionProgress = { tombstoned: 0, finished: 0, batches: 0 };
  const tickMs = Math.max(1, deps.reconcile.tickSeconds * 1000);
  const start = (): DeselectionTurnsStart => {
    const after = lastServed.get(deps.pool);
    return after === undefined ? { offset: Math.floor(at / tickMs) * batches } : { after };
  };
  while (progress.batches < batches) {
    const pending = await findDeselectionsToFinish(deps.pool, connectorSlugs(), batches - progress.batches, start());
    if (pending.length === 0) break;
    await takeTurns(pending, async (unit, wait) => {
      if (progress.batches >= batches) return 'spent';
      const step = await withTransaction(deps.pool, (tx) => finishBatch(tx, unit, wait));
      if (step.state === 'busy') return 'busy';
      progress.batches += 1;
      lastServed.set(deps.pool, unit.tenantId);
      progress.tombstoned += step.tombstoned;
      if (step.state === 'finished') progress.finished += 1;
      return step.state;
    });
  }
  if (progress.tombstoned > 0 || progress.finished > 0) deps.logger.info(progress, 'deselected records tombstoned');
  return progress;
}

/**
 * Runs `batch` over `units` (listed in turns of tenants, as findDeselectionsToFinish lists them)
 * in rounds: each round gives every tenant one batch, of its oldest unit not yet done (one that
 * answered `finished` or `skipped` is done; `more` gets the tenant's next turn), tenants in the
 * order their first unit is listed. A unit whose locks are held (`busy`, asked without waiting)
 * is passed by: the tenant's turn goes to its next unit, and the unit is asked again next round.
 * A round in which every unit asked was busy is followed by one that waits for their locks (they
 * are all that is left). Ends when every unit is done, or a batch answers `spent`.
 */
async function takeTurns(
  units: readonly DeselectionToFinish[],
  batch: (unit: DeselectionToFinish, wait: boolean) => Promise<'more' | 'finished' | 'skipped' | 'busy' | 'spent'>,
): Promise<void> {
  const byTenant = new Map<string, DeselectionToFinish[]>();
  for (const unit of units) {
    const own = byTenant.get(unit.tenantId);
    if (own) own.push(unit);
    else byTenant.set(unit.tenantId, [unit]);
  }
  let wait = false;
  while (byTenant.size > 0) {
    let ran = false;
    for (const [tenant, own] of byTenant) {
      for (let k = 0; k < own.length; k++) {
        const state = await batch(own[k]!, wait);
        if (state === 'spent') return;
        if (state === 'busy') continue;
        ran = true;
        if (state !== 'more') own.splice(k, 1);
        break;
      }
      if (own.length === 0) byTenant.delete(tenant);
    }
    wait = !ran;
  }
}

/**
 * One batch of pending deselection `unit`: how many it tombstoned, and what is left: `more`,
 * nothing (`finished`: its row deleted), nothing for this tick to do (`skipped`: gone already,
 * or its connection is being purged), or, unless it may `wait`, nothing done because another
 * transaction holds the connection's purge or feed lock (`busy`).
 */
async function finishBatch(tx: PoolClient, unit: DeselectionToFinish, wait: boolean): Promise<{ tombstoned: number; state: 'more' | 'finished' | 'skipped' | 'busy' }> {
  const busy = { tombstoned: 0, state: 'busy' } as const;
  // The purge lock shared first, as a config change takes it: a purge recorded since the unit was
  // listed deletes the records itself (and waits for this batch to commit before it is recorded).
  const purge = wait ? await findOpenPurgeLocked(tx, unit.connectionId) : await findOpenPurgeLockedNoWait(tx, unit.connectionId);
  if (purge === 'busy') return busy;
  if (purge) return { tombstoned: 0, state: 'skipped' };
  if (wait) await lockChangeFeed(tx, unit.connectionId);
  else if (!(await tryLockChangeFeed(tx, unit.connectionId))) return busy;
  const row = await lockDeselection(tx, unit.connectionId, unit);
  if (!row) return { tombstoned: 0, state: 'skipped' };
  const config = await lockConfigForShare(tx, unit.connectionId);
  const again = reselected(getConnector(unit.providerSlug), config, unit);
  if (again === 'all') {
    await forgetDeselections(tx, unit.connectionId, [unit]);
    return { tombstoned: 0, state: 'finished' };
  }
  const { tombstoned, visited, last } = await tombstoneDeselectedBatch(
    tx, { connectionId: unit.connectionId, countedChange: false },
    { resourceType: unit.resourceType, idPrefix: unit.idPrefix, keep: again.keep, afterId: row.afterId, limit: DESELECTION_BATCH },
  );
  if (visited < DESELECTION_BATCH) {
    await forgetDeselections(tx, unit.connectionId, [unit]);
    return { tombstoned, state: 'finished' };
  }
  await advanceDeselection(tx, unit.connectionId, unit, last ?? row.afterId);
  return { tombstoned, state: 'more' };
}
