// SQL of `oauth_apps`: a tenant's OAuth clients. The client secret is sealed (bound to the row);
// rows as the API shows them never carry it, only `findOAuthAppClient` (for a token request) does.
import type { Queryable } from '../queryable';
import { sealedTextColumn } from '../sealed-text';

/** An OAuth app as the API shows it: never its client secret. */
export interface OAuthAppRow {
  id: string;
  tenant_id: string;
  name: string;
  client_id: string;
  authorize_url: string;
  token_url: string;
  redirect_uri: string;
  scopes: string[];
  created_at: Date;
  updated_at: Date;
}

/** An app with its sealed client secret: what a token request needs. */
export interface OAuthAppClient extends OAuthAppRow {
  client_secret: string;
}

const COLUMNS = 'id, tenant_id, name, client_id, authorize_url, token_url, redirect_uri, scopes, created_at, updated_at';

/** A new app; the id is chosen by the caller (the sealed secret is bound to it). */
export interface NewOAuthApp {
  id: string;
  tenantId: string;
  name: string;
  clientId: string;
  sealedClientSecret: string;
  authorizeUrl: string;
  tokenUrl: string;
  redirectUri: string;
  scopes: string[];
}

/** Inserts an app; null when the tenant already has one of that name. */
export async function insertOAuthApp(db: Queryable, app: NewOAuthApp): Promise<OAuthAppRow | null> {
  const { rows } = await db.query<OAuthAppRow>(
    `insert into oauth_apps (id, tenant_id, name, client_id, client_secret, authorize_url, token_url, redirect_uri, scopes)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     on conflict (tenant_id, name) do nothing
     returning ${COLUMNS}`,
    [app.id, app.tenantId, app.name, app.clientId, app.sealedClientSecret, app.authorizeUrl, app.tokenUrl, app.redirectUri, app.scopes],
  );
  return rows[0] ?? null;
}

/** The app with id `id`, or null. */
export async function findOAuthApp(db: Queryable, id: string): Promise<OAuthAppRow | null> {
  const { rows } = await db.query<OAuthAppRow>(`select ${COLUMNS} from oauth_apps where id = $1`, [id]);
  return rows[0] ?? null;
}

/** The app with id `id` and its sealed client secret, or null. */
export async function findOAuthAppClient(db: Queryable, id: string): Promise<OAuthAppClient | null> {
  const { rows } = await db.query<OAuthAppClient>(`select ${COLUMNS}, client_secret from oauth_apps where id = $1`, [id]);
  return rows[0] ?? null;
}

/** One page of apps ordered by id, of one tenant when given; `limit + 1` rows are read to know if more exist. */
export async function listOAuthApps(db: Queryable, query: { tenantId?: string; afterId?: string; limit: number }): Promise<{ rows: OAuthAppRow[]; more: boolean }> {
  const { rows } = await db.query<OAuthAppRow>(
    `select ${COLUMNS} from oauth_apps
      where ($1::text is null or tenant_id = $1) and ($2::uuid is null or id > $2)
      order by id limit $3`,
    [query.tenantId ?? null, query.afterId ?? null, query.limit + 1],
  );
  return { rows: rows.slice(0, query.limit), more: rows.length > query.limit };
}

/** Fields of an app that may change; undefined leaves a field as it is. */
export interface OAuthAppChange {
  clientId?: string;
  sealedClientSecret?: string;
  authorizeUrl?: string;
  tokenUrl?: string;
  redirectUri?: string;
  scopes?: string[];
}

/** Applies `change` to app `id`; the row after, or null when there is none. */
export async function updateOAuthApp(db: Queryable, id: string, change: OAuthAppChange): Promise<OAuthAppRow | null> {
  const { rows } = await db.query<OAuthAppRow>(
    `update oauth_apps set client_id = coalesce($2, client_id), client_secret = coalesce($3, client_secret),
            authorize_url = coalesce($4, authorize_url), token_url = coalesce($5, token_url),
            redirect_uri = coalesce($6, redirect_uri), scopes = coalesce($7, scopes)
      where id = $1
      returning ${COLUMNS}`,
    [id, change.clientId ?? null, change.sealedClientSecret ?? null, change.authorizeUrl ?? null, change.tokenUrl ?? null, change.redirectUri ?? null, change.scopes ?? null],
  );
  return rows[0] ?? null;
}

/**
 * Locks app `id` against deletion until the transaction ends (FOR KEY SHARE, what a row naming it
 * takes anyway), waiting for a deletion under way to commit first. False when there is no such app.
 */
export async function lockOAuthAppForUse(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query('select 1 from oauth_apps where id = $1 for key share', [id]);
  return (rowCount ?? 0) > 0;
}

/**
 * Locks app `id` for a change or its deletion until the transaction ends (FOR UPDATE: a connect
 * flow storing a grant of the app commits first, so the next statement sees that grant), answering
 * its token URL as stored; null when there is no such app.
 */
export async function lockOAuthAppForChange(db: Queryable, id: string): Promise<{ token_url: string } | null> {
  const { rows } = await db.query<{ token_url: string }>('select token_url from oauth_apps where id = $1 for update', [id]);
  return rows[0] ?? null;
}

/** Whether a grant of app `id` exists (a connection's connect flow completed through it). */
export async function oauthAppHasGrants(db: Queryable, id: string): Promise<boolean> {
  const { rows } = await db.query<{ any: boolean }>('select exists (select 1 from oauth_grants where oauth_app_id = $1) as any', [id]);
  return rows[0]!.any;
}

/** Deletes app `id` unless a connection's credential uses it: 'deleted', 'in_use' or 'missing'. */
export async function deleteOAuthApp(db: Queryable, id: string): Promise<'deleted' | 'in_use' | 'missing'> {
  const { rows } = await db.query<{ outcome: 'deleted' | 'in_use' | 'missing' }>(
    `with used as (select exists (select 1 from connections where oauth_app_id = $1) as used),
          gone as (delete from oauth_apps where id = $1 and not (select used from used) returning id)
     select case when exists (select 1 from gone) then 'deleted'
                 when (select used from used) and exists (select 1 from oauth_apps where id = $1) then 'in_use'
                 else 'missing' end as outcome`,
    [id],
  );
  return rows[0]!.outcome;
}

const sealedColumn = sealedTextColumn('oauth_apps', 'client_secret');

/** The next `limit` apps after `afterId` whose client secret is not sealed under key `activeId` (with null: not sealed at all). */
export const listClientSecretsToReseal = sealedColumn.listToReseal;

/** Replaces app `id`'s client secret with `sealed` only if it still is `stored` (compare and set). */
export const replaceClientSecret = sealedColumn.replace;

/** How many apps have a client secret not sealed under key `activeId`. */
export const countClientSecretsToReseal = sealedColumn.countToReseal;
