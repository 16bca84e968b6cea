// Sealing stored secrets: the start-up step that seals legacy plaintext rows, and rotation
// (`npm run credentials:rotate`), which re-seals every row under the active key: connection
// credentials (OAuth 2 grants included: they are the connection's envelope), webhook secrets
// (and the previous secret a rotation keeps for its overlap),
// OAuth apps' client secrets and the PKCE verifiers of connect flows under way (a person who
// started one before the rotation completes it after the old key is removed; expired flows are
// never opened again and are left as they are).
import * as connections from '../db/models/connections';
import * as oauthApps from '../db/models/oauth-apps';
import * as oauthStates from '../db/models/oauth-states';
import * as webhooks from '../db/models/webhooks';
import type { Pool } from '../db/pool';
import { isEnvelope, open, seal, sealCredentials, type Keyring } from '../lib/credentials';
import type { Logger } from '../lib/logger';

/** Rows read per batch: each is one short statement, so no table is locked for long. */
const BATCH = 200;

/** What a sealing pass did. */
export interface ResealResult {
  /** Rows sealed anew (under the active key). */
  sealed: number;
  /** Rows that changed under the pass (a PATCH, another rotation) and were left to it. */
  skipped: number;
  /** Rows still not under the active key afterwards (0 when the pass is complete). */
  remaining: number;
}

/**
 * The start-up step of every process that opens secrets (the API, the worker, `npm start`; run by
 * `runService` in processes/service.ts): legacy plaintext rows are sealed before it serves or polls (idempotent; safe beside other processes).
 */
export async function sealPlaintextSecrets(deps: { pool: Pool; credentials: Keyring }, logger: Logger): Promise<void> {
  const { sealed } = await resealSecrets(deps, 'plaintext');
  if (sealed > 0) logger.info({ sealed }, 'sealed plaintext credentials and webhook secrets');
}

/**
 * Seals secrets under the active key: with `scope: 'plaintext'` only legacy plaintext rows (the
 * start-up step), with `scope: 'all'` also envelopes of other keys (rotation). Walks each table by
 * id in batches and writes each row with compare-and-set, so it is safe while workers and API
 * processes run (they open envelopes of every configured key) and resumable: a second run picks
 * up what the first left. Passes repeat while rows changed under them, up to `maxPasses`.
 */
export async function resealSecrets(
  deps: { pool: Pool; credentials: Keyring },
  scope: 'plaintext' | 'all',
  onBatch: (table: string, done: number) => void = () => undefined,
  maxPasses = 3,
): Promise<ResealResult> {
  const keyring = deps.credentials;
  const activeId = scope === 'all' ? keyring.activeId : null;
  const result: ResealResult = { sealed: 0, skipped: 0, remaining: 0 };
  for (let pass = 0; pass < maxPasses; pass++) {
    const skippedThisPass =
      (await resealTable({
        table: 'connections',
        list: (after) => connections.listCredentialsToReseal(deps.pool, activeId, after, BATCH),
        resealed: (row) => {
          const plaintext = isEnvelope(row.stored) ? JSON.parse(open(keyring, { table: 'connections', id: row.id }, row.stored)) : row.stored;
          return sealCredentials(keyring, row.id, plaintext as Record<string, unknown>)!;
        },
        replace: (row, sealed) => connections.replaceCredentials(deps.pool, row.id, row.stored, sealed),
      }, result, onBatch)) +
      (await resealTable({
        // An OAuth 2 grant's envelope is bound to its id in the slot of a connection's credentials.
        table: 'oauth_grants',
        list: (after) => connections.listGrantsToReseal(deps.pool, activeId, after, BATCH),
        resealed: (row) => {
          const plaintext = isEnvelope(row.stored) ? JSON.parse(open(keyring, { table: 'connections', id: row.id }, row.stored)) : row.stored;
          return sealCredentials(keyring, row.id, plaintext as Record<string, unknown>)!;
        },
        replace: (row, sealed) => connections.replaceGrantCredentials(deps.pool, row.id, row.stored, sealed),
      }, result, onBatch)) +
      (await resealTable({
        table: 'webhooks',
        list: (after) => webhooks.listSecretsToReseal(deps.pool, activeId, after, BATCH),
        resealed: (row) => resealText(keyring, { table: 'webhooks', id: row.id }, row.stored),
        replace: (row, sealed) => webhooks.replaceSecret(deps.pool, row.id, row.stored, sealed),
      }, result, onBatch)) +
      (await resealTable({
        // The secret a rotation replaced, while it is kept: bound to its webhook's row as the secret is.
        table: 'webhooks.previous_secret',
        list: (after) => webhooks.listPreviousSecretsToReseal(deps.pool, activeId, after, BATCH),
        resealed: (row) => resealText(keyring, { table: 'webhooks', id: row.id }, row.stored),
        replace: (row, sealed) => webhooks.replacePreviousSecret(deps.pool, row.id, row.stored, sealed),
      }, result, onBatch)) +
      (await resealTable({
        table: 'oauth_apps',
        list: (after) => oauthApps.listClientSecretsToReseal(deps.pool, activeId, after, BATCH),
        resealed: (row) => resealText(keyring, { table: 'oauth_apps', id: row.id }, row.stored),
        replace: (row, sealed) => oauthApps.replaceClientSecret(deps.pool, row.id, row.stored, sealed),
      }, result, onBatch)) +
      (await resealTable({
        // A verifier is bound to its flow's state hash (the row's key).
        table: 'oauth_states',
        list: (after) => oauthStates.listVerifiersToReseal(deps.pool, activeId, after, BATCH),
        resealed: (row) => resealText(keyring, { table: 'oauth_states', id: row.id }, row.stored),
        replace: (row, sealed) => oauthStates.replaceVerifier(deps.pool, row.id, row.stored, sealed),
      }, result, onBatch));
    result.skipped += skippedThisPass;
    if (skippedThisPass === 0) break;
  }
  if (scope === 'all') {
    result.remaining =
      (await connections.countCredentialsToReseal(deps.pool, keyring.activeId)) +
      (await connections.countGrantsToReseal(deps.pool, keyring.activeId)) +
      (await webhooks.countSecretsToReseal(deps.pool, keyring.activeId)) +
      (await webhooks.countPreviousSecretsToReseal(deps.pool, keyring.activeId)) +
      (await oauthApps.countClientSecretsToReseal(deps.pool, keyring.activeId)) +
      (await oauthStates.countVerifiersToReseal(deps.pool, keyring.activeId));
  }
  return result;
}

/** One table's sealed column as a sealing pass walks it: rows by id after a given one, a row's value sealed anew, a compare-and-set write. */
interface ResealTable<Stored> {
  table: string;
  list(afterId: string): Promise<{ id: string; stored: Stored }[]>;
  resealed(row: { id: string; stored: Stored }): string;
  replace(row: { id: string; stored: Stored }, sealed: string): Promise<boolean>;
}

/**
 * Walks one table by id in batches of BATCH, sealing each row anew and writing it with
 * compare-and-set; counts what it sealed into `result` and reports each batch. Returns how many
 * rows changed under it (left to whoever changed them).
 */
async function resealTable<Stored>(
  walk: ResealTable<Stored>,
  result: ResealResult,
  onBatch: (table: string, done: number) => void,
): Promise<number> {
  let skipped = 0;
  for (let after = '00000000-0000-0000-0000-000000000000'; ; ) {
    const rows = await walk.list(after);
    if (rows.length === 0) return skipped;
    for (const row of rows) {
      if (await walk.replace(row, walk.resealed(row))) result.sealed++;
      else skipped++;
    }
    after = rows.at(-1)!.id;
    onBatch(walk.table, result.sealed);
  }
}

/** A text secret (a webhook's, an OAuth app's) sealed under the active key: opened first when it is an envelope, as is when legacy plaintext. */
function resealText(keyring: Keyring, slot: Parameters<typeof seal>[1], stored: string): string {
  return seal(keyring, slot, isEnvelope(stored) ? open(keyring, slot, stored) : stored);
}
