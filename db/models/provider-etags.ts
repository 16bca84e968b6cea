// SQL of `provider_etags`: the ETag of each first-page URL a connection's listings answered, for
// conditional requests (a 304 answers "unchanged" without spending the provider's rate limit).
import type { Queryable } from '../queryable';

/** The stored ETags of a connection's resource type, by first-page URL. */
export async function findEtags(db: Queryable, connectionId: string, resourceType: string): Promise<Map<string, string>> {
  const { rows } = await db.query<{ url: string; etag: string }>(
    'select url, etag from provider_etags where connection_id = $1 and resource_type = $2',
    [connectionId, resourceType],
  );
  return new Map(rows.map((r) => [r.url, r.etag]));
}

/** Stores (or replaces) the ETag of each first-page URL given. */
export async function saveEtags(
  db: Queryable,
  connectionId: string,
  resourceType: string,
  validators: readonly { url: string; etag: string }[],
): Promise<void> {
  if (validators.length === 0) return;
  await db.query(
    `insert into provider_etags (connection_id, resource_type, url, etag)
     select $1, $2, v.url, v.etag from unnest($3::text[], $4::text[]) as v(url, etag)
     on conflict (connection_id, resource_type, url) do update set etag = excluded.etag, updated_at = now()`,
    [connectionId, resourceType, validators.map((v) => v.url), validators.map((v) => v.etag)],
  );
}
