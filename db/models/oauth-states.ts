// SQL of `oauth_states`: connect flows under way. A state is stored as its SHA-256 hash only, with
// the sealed PKCE verifier, and is consumed (deleted) by the one callback that presents it.
import type { Queryable } from '../queryable';

/** A connect flow's stored state. */
export interface OAuthStateRow {
  state_hash: string;
  tenant_id: string;
  connection_id: string;
  oauth_app_id: string;
  /** Sealed, bound to the row (its state hash). */
  code_verifier: string;
  expires_at: Date;
}

/** Stores a new state; expired states of the same connection go in the same statement. */
export async function insertOAuthState(db: Queryable, state: Omit<OAuthStateRow, never>): Promise<void> {
  await db.query(
    `with expired as (delete from oauth_states where connection_id = $3 and expires_at < now())
     insert into oauth_states (state_hash, tenant_id, connection_id, oauth_app_id, code_verifier, expires_at)
     values ($1, $2, $3, $4, $5, $6)`,
    [state.state_hash, state.tenant_id, state.connection_id, state.oauth_app_id, state.code_verifier, state.expires_at],
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
