// SQL of `provider_etags`: the ETag of each page URL a connection's listings answered, with what
// follows that page, for conditional requests (a 304 answers "this page is unchanged" without
// spending the provider's rate limit, and the pass goes on after it).
import type { StoredValidator } from '../../policy/records';
import type { Queryable } from '../queryable';

/** The stored validators of a connection's resource type, by page URL. */
export async function findEtags(db: Queryable, connectionId: string, resourceType: string): Promise<Map<string, StoredValidator>> {
  const { rows } = await db.query<{ url: string; etag: string; next: string | null }>(
    'select url, etag, next from provider_etags where connection_id = $1 and resource_type = $2',
    [connectionId, resourceType],
  );
  return new Map(rows.map((r) => [r.url, { etag: r.etag, next: r.next }]));
}

/** Stores (or replaces) the validator of each page URL given. */
export async function saveEtags(
  db: Queryable,
  connectionId: string,
  resourceType: string,
  validators: readonly ({ url: string } & StoredValidator)[],
): Promise<void> {
  if (validators.length === 0) return;
  await db.query(
    `insert into provider_etags (connection_id, resource_type, url, etag, next)
     select $1, $2, v.url, v.etag, v.next from unnest($3::text[], $4::text[], $5::text[]) as v(url, etag, next)
     on conflict (connection_id, resource_type, url) do update set etag = excluded.etag, next = excluded.next, updated_at = now()`,
    [connectionId, resourceType, validators.map((v) => v.url), validators.map((v) => v.etag), validators.map((v) => v.next)],
  );
}

/**
 * Notes that each validator given was confirmed now (a 304 answered it): only one still stored with
 * that ETag. One forgotten meanwhile stays forgotten: a full pass that tombstoned records on its
 * listing's word forgot it (see `forgetEtags`), and a 304 vouches for no record (a page served
 * with none), so it cannot say that page's records are not among them.
 */
export async function confirmEtags(
  db: Queryable,
  connectionId: string,
  resourceType: string,
  validators: readonly { url: string; etag: string }[],
): Promise<void> {
  if (validators.length === 0) return;
  await db.query(
    `update provider_etags p set updated_at = now()
       from unnest($3::text[], $4::text[]) as v(url, etag)
      where p.connection_id = $1 and p.resource_type = $2 and p.url = v.url and p.etag = v.etag`,
    [connectionId, resourceType, validators.map((v) => v.url), validators.map((v) => v.etag)],
  );
}

/**
 * Forgets the validators of a connection's resource type that were neither stored nor confirmed
 * (by a 304) since `before`: what a complete pass did not visit (an old `since` URL, a page past
 * where an incremental pass stopped, a repository no longer configured). Its records may have
 * changed in our store since (a tombstone), so no later 304 may vouch for them.
 */
export async function forgetEtagsBefore(db: Queryable, connectionId: string, resourceType: string, before: Date): Promise<number> {
  const { rowCount } = await db.query('delete from provider_etags where connection_id = $1 and resource_type = $2 and updated_at < $3', [
    connectionId,
    resourceType,
    before,
  ]);
  return rowCount ?? 0;
}

/** Forgets the stored validators of the connection's resource types `resourceTypes` (their listing changed). */
export async function forgetEtags(db: Queryable, connectionId: string, resourceTypes: readonly string[]): Promise<void> {
  if (resourceTypes.length === 0) return;
  await db.query('delete from provider_etags where connection_id = $1 and resource_type = any($2::text[])', [connectionId, [...resourceTypes]]);
}
