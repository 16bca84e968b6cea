// What a connection's config selects of its provider's data: its resource types and, for a
// connector with partitions, the partitions it names. The synced set is the provider's data as the
// config selects it: records of anything else leave the live set (a config change deselects them:
// its request tombstones one batch, the reconcile tick the rest) and a pass that read an older
// config stores none of them.
import type { Connector, ConnectorRecord } from './types';

/** `f()`, or `otherwise` when it throws (a config the connector cannot read selects nothing). */
function safely<T>(f: () => T, otherwise: T): T {
  try {
    return f();
  } catch {
    return otherwise;
  }
}

/**
 * Those of `records` (of `resourceType`) that connection config `config` selects: none when it
 * does not list the resource type, or is null (the connection is gone); with partitions, those of
 * a partition it names (as it spells it: a record names the partition it was read from).
 */
export function selectedRecords(connector: Connector, config: Record<string, unknown> | null, resourceType: string, records: readonly ConnectorRecord[]): ConnectorRecord[] {
  if (config === null || !safely(() => connector.resourceTypes(config).includes(resourceType), false)) return [];
  if (!connector.partitions) return [...records];
  const named = new Set(safely(() => connector.partitions!(config), []));
  return records.filter((r) => named.has(r.partition ?? ''));
}

/** What a config change stops selecting: whole resource types, and partitions of the types it keeps. */
export interface Deselection {
  resourceTypes: string[];
  /** A partition no longer named, per resource type still listed, with the prefix of its records' ids. */
  partitions: { resourceType: string; partition: string; idPrefix: string }[];
}

/**
 * What config `after` stops selecting of what `before` selected: the resource types only `before`
 * lists, and (a connector with partitions) the partitions only `before` names, for each type both
 * list. Nothing when either config is one the connector cannot read.
 */
export function deselection(connector: Connector, before: Record<string, unknown>, after: Record<string, unknown>): Deselection {
  const was = safely(() => connector.resourceTypes(before), null);
  const now = safely(() => connector.resourceTypes(after), null);
  if (was === null || now === null) return { resourceTypes: [], partitions: [] };
  const resourceTypes = was.filter((t) => !now.includes(t));
  if (!connector.partitions || !connector.partitionIdPrefix) return { resourceTypes, partitions: [] };
  const named = safely(() => connector.partitions!(after), null);
  const removed = named === null ? [] : safely(() => connector.partitions!(before), []).filter((p) => !named.includes(p));
  const kept = now.filter((t) => was.includes(t));
  return {
    resourceTypes,
    partitions: kept.flatMap((resourceType) => removed.map((partition) => ({ resourceType, partition, idPrefix: connector.partitionIdPrefix!(partition) }))),
  };
}

/** One unit of a deselection: a whole resource type (`idPrefix` empty), or its records whose ids start with `idPrefix`. */
export interface DeselectedUnit {
  resourceType: string;
  idPrefix: string;
}

/** A deselection as its units: each resource type whole, each partition by its id prefix. */
export function deselectedUnits(d: Deselection): DeselectedUnit[] {
  return [
    ...d.resourceTypes.map((resourceType) => ({ resourceType, idPrefix: '' })),
    ...d.partitions.map((p) => ({ resourceType: p.resourceType, idPrefix: p.idPrefix })),
  ];
}

/**
 * What config `config` (null: the connection is gone) selects again of deselected `unit`: `all`
 * (none of its records is to be tombstoned), or the id prefixes of the partitions it names of the
 * unit's type (its records under one of them stay; empty: every record of the unit goes). A type
 * it does not list (or a config the connector cannot read) selects none of them; a listed type of
 * a connector without partitions selects all; a listed partition unit whose partition is named
 * again, all.
 */
export function reselected(connector: Connector, config: Record<string, unknown> | null, unit: DeselectedUnit): 'all' | { keep: string[] } {
  if (config === null || !safely(() => connector.resourceTypes(config).includes(unit.resourceType), false)) return { keep: [] };
  if (!connector.partitions || !connector.partitionIdPrefix) return 'all';
  const keep = safely(() => connector.partitions!(config), []).map((p) => connector.partitionIdPrefix!(p));
  return unit.idPrefix !== '' && keep.includes(unit.idPrefix) ? 'all' : { keep };
}
