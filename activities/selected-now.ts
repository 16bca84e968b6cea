import { selectedRecords } from '../connectors/selection';
import type { Connector, ConnectorRecord } from '../connectors/types';
import { lockConfigForShare } from '../db/models/connections';
import { lockChangeFeed } from '../db/models/records';
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
