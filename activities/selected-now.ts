import { selectedRecords } from '../connectors/selection';
import type { Connector, ConnectorRecord } from '../connectors/types';
import { lockConfigForShare } from '../db/models/connections';
import { lockChangeFeed } from '../db/models/records';
import type { Queryable } from '../db/queryable';
import type { PoolClient } from 'pg';

/**
 * Those of `records` (of `resourceType`, read under an older config of connection `connectionId`)
 * that its config as it is now selects, read in `tx` under the change-feed lock and then the
 * config's share lock, both held to the commit (the order a config change takes them): a change
 * that stopped selecting some of them either committed before and is read here (with its
 * tombstones or its pending deselection), or waits until `tx` has stored them and then deselects
 * them (its own batch, or the reconcile tick's).
 */
export async function selectedNow(tx: PoolClient, connector: Connector, connectionId: string, resourceType: string, records: readonly ConnectorRecord[]): Promise<ConnectorRecord[]> {
  await lockChangeFeed(tx, connectionId);
  return selectedRecords(connector, await lockConfigForShare(tx, connectionId), resourceType, records);
}

/** A page as stored: the records written and the counts of the write that wrote them. */
export interface StoredPage<C> {
  stored: ConnectorRecord[];
  counts: C;
}

/**
 * Stores a page of `records` (of `resourceType`) that a run read under config epoch `configEpoch`
 * (connection `connectionId`'s count of config changes). `write` is the caller's `upsertRecords` of
 * the page, with the epoch when given; `run.first` runs it under `configEpoch` (on the pool, or in
 * a transaction with what is stored beside it). When that answers `current: false` (the config
 * changed since the run read it: nothing was written), the page is stored again, in the
 * transaction `run.again` gives (after what it must hold first), under the config as it is now:
 * only the records that config selects (`selectedNow`; what it stopped selecting was tombstoned by
 * the change), with no epoch. Answers the records stored and the counts.
 */
export async function storeUnderCurrentConfig<C extends { current?: boolean }>(
  page: { connector: Connector; connectionId: string; resourceType: string; records: ConnectorRecord[]; configEpoch: string },
  write: (db: Queryable, records: ConnectorRecord[], configEpoch?: string) => Promise<C>,
  run: {
    first: (store: (db: Queryable) => Promise<C>) => Promise<C>;
    again: (store: (tx: PoolClient) => Promise<StoredPage<C>>) => Promise<StoredPage<C>>;
  },
): Promise<StoredPage<C>> {
  const counts = await run.first((db) => write(db, page.records, page.configEpoch));
  if (counts.current !== false) return { stored: page.records, counts };
  return run.again(async (tx) => {
    const selected = await selectedNow(tx, page.connector, page.connectionId, page.resourceType, page.records);
    return { stored: selected, counts: await write(tx, selected) };
  });
}
