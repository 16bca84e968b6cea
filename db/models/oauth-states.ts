// SQL of `oauth_states`: connect flows under way. A state is stored as its SHA-256 hash only, with
// the sealed PKCE verifier, and is consumed (deleted) by the one callback that presents it.
import type { Queryable } from '../queryable';

/** A connect flow's stored state. */
export interface OAuthStateRow {
  state_hash: string;
  tenant_id: string;
  connection_id: string;
  oauth_app_id: string;
  /** Sealed, bound to the row (its state hash): the PKCE verifier and the scopes asked for (policy/oauth.ts `connectFlowSecretText`). */
  code_verifier: string;
  expires_at: Date;
}

/**
 * Stores a new state, while its connection and its OAuth app both exist (each locked FOR KEY
 * SHARE, waiting for a deletion under way to commit first); expired states of the same connection
 * go in the same statement. False when either is gone.
 */
export async function insertOAuthState(db: Queryable, state: Omit<OAuthStateRow, never>): Promise<boolean> {
  const { rowCount } = await db.query(
    `with expired as (delete from oauth_states where connection_id = $3 and expires_at < now()),
          parents as (select 1 from connections c, oauth_apps a where c.id = $3 and a.id = $4 for key share of c, a)
     insert into oauth_states (state_hash, tenant_id, connection_id, oauth_app_id, code_verifier, expires_at)
     select $1, $2, $3, $4, $5, $6 from parents`,
    [state.state_hash, state.tenant_id, state.connection_id, state.oauth_app_id, state.code_verifier, state.expires_at],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Tenant `tenantId`'s connect flows under way: how many live states it holds and when the first
 * of them expires (null when none). Reached through the tenant's OAuth apps (a state's app is
 * always of its tenant), whose index bounds the rows read.
 */
export async function countTenantOAuthStates(db: Queryable, tenantId: string): Promise<{ live: number; firstExpiry: Date | null }> {
  const { rows } = await db.query<{ live: number; first_expiry: Date | null }>(
    `select count(*)::int as live, min(expires_at) as first_expiry from oauth_states
      where oauth_app_id in (select id from oauth_apps where tenant_id = $1) and tenant_id = $1 and expires_at > now()`,
    [tenantId],
  );
  return { live: rows[0]!.live, firstExpiry: rows[0]!.first_expiry };
}

/** Deletes tenant `tenantId`'s expired states (found as countTenantOAuthStates finds them). */
export async function deleteExpiredTenantOAuthStates(db: Queryable, tenantId: string): Promise<void> {
  await db.query(
    `delete from oauth_states where oauth_app_id in (select id from oauth_apps where tenant_id = $1) and tenant_id = $1 and expires_at <= now()`,
    [tenantId],
  );
}

/**
 * Consumes the state with hash `stateHash`: deletes it and returns it when it has not expired at
 * `at`; null when it is unknown, used already or expired (an expired one is deleted too).
 */
export async function consumeOAuthState(db: Queryable, stateHash: string, at: Date): Promise<OAuthStateRow | null> {
  const { rows } = await db.query<OAuthStateRow>(
    `delete from oauth_states where state_hash = $1
     returning state_hash, tenant_id, connection_id, oauth_app_id, code_verifier, expires_at`,
    [stateHash],
  );
  const row = rows[0];
  return row && row.expires_at.getTime() > at.getTime() ? row : null;
}

/**
 * The next `limit` flows under way (not expired) after state hash `afterHash` whose verifier is not
 * sealed under key `activeId`, as key rotation walks them (`id`: the state hash, the row the
 * verifier is bound to). An expired flow is never opened again, so it is left as it is.
 */
export async function listVerifiersToReseal(db: Queryable, activeId: string | null, afterHash: string, limit: number): Promise<{ id: string; stored: string }[]> {
  const { rows } = await db.query<{ id: string; stored: string }>(
    `select state_hash as id, code_verifier as stored from oauth_states
      where state_hash > $2 and expires_at > now() and not starts_with(code_verifier, 'enc:v1:' || coalesce($1::text || ':', ''))
      order by state_hash limit $3`,
    [activeId, afterHash, limit],
  );
  return rows;
}

/** Replaces flow `stateHash`'s verifier with `sealed` only if it still is `stored` (compare and set). */
export async function replaceVerifier(db: Queryable, stateHash: string, stored: string, sealed: string): Promise<boolean> {
  const { rowCount } = await db.query('update oauth_states set code_verifier = $3 where state_hash = $1 and code_verifier = $2', [stateHash, stored, sealed]);
  return (rowCount ?? 0) > 0;
}

/** How many flows under way (not expired) hold a verifier not sealed under key `activeId`. */
export async function countVerifiersToReseal(db: Queryable, activeId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `select count(*)::int as n from oauth_states where expires_at > now() and not starts_with(code_verifier, 'enc:v1:' || $1 || ':')`,
    [activeId],
  );
  return rows[0]!.n;
}
