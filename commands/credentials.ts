// Sealing stored secrets: the start-up step that seals legacy plaintext rows, and rotation
// (`npm run credentials:rotate`), which re-seals every row under the active key: connection
// credentials (OAuth 2 grants included: they are the connection's envelope), webhook secrets and
// OAuth apps' client secrets. A connect flow's PKCE verifier lives ten minutes and is not re-sealed.
import * as connections from '../db/models/connections';
import * as oauthApps from '../db/models/oauth-apps';
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
 * `runService` in scripts/service.ts): legacy plaintext rows are sealed before it serves or polls (idempotent; safe beside other processes).
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
    let skippedThisPass = 0;
    for (let after = '00000000-0000-0000-0000-000000000000'; ; ) {
      const rows = await connections.listCredentialsToReseal(deps.pool, activeId, after, BATCH);
      if (rows.length === 0) break;
      for (const row of rows) {
        const plaintext = isEnvelope(row.stored) ? JSON.parse(open(keyring, { table: 'connections', id: row.id }, row.stored)) : row.stored;
        const sealed = sealCredentials(keyring, row.id, plaintext as Record<string, unknown>)!;
        if (await connections.replaceCredentials(deps.pool, row.id, row.stored, sealed)) result.sealed++;
        else skippedThisPass++;
      }
      after = rows.at(-1)!.id;
      onBatch('connections', result.sealed);
    }
    for (let after = '00000000-0000-0000-0000-000000000000'; ; ) {
      const rows = await webhooks.listSecretsToReseal(deps.pool, activeId, after, BATCH);
      if (rows.length === 0) break;
      for (const row of rows) {
        const slot = { table: 'webhooks' as const, id: row.id };
        const plaintext = isEnvelope(row.stored) ? open(keyring, slot, row.stored) : row.stored;
        if (await webhooks.replaceSecret(deps.pool, row.id, row.stored, seal(keyring, slot, plaintext))) result.sealed++;
        else skippedThisPass++;
      }
      after = rows.at(-1)!.id;
      onBatch('webhooks', result.sealed);
    }
    for (let after = '00000000-0000-0000-0000-000000000000'; ; ) {
      const rows = await oauthApps.listClientSecretsToReseal(deps.pool, activeId, after, BATCH);
      if (rows.length === 0) break;
      for (const row of rows) {
        const slot = { table: 'oauth_apps' as const, id: row.id };
        const plaintext = isEnvelope(row.stored) ? open(keyring, slot, row.stored) : row.stored;
        if (await oauthApps.replaceClientSecret(deps.pool, row.id, row.stored, seal(keyring, slot, plaintext))) result.sealed++;
        else skippedThisPass++;
      }
      after = rows.at(-1)!.id;
      onBatch('oauth_apps', result.sealed);
    }
    result.skipped += skippedThisPass;
    if (skippedThisPass === 0) break;
  }
  if (scope === 'all') {
    result.remaining =
      (await connections.countCredentialsToReseal(deps.pool, keyring.activeId)) +
      (await webhooks.countSecretsToReseal(deps.pool, keyring.activeId)) +
      (await oauthApps.countClientSecretsToReseal(deps.pool, keyring.activeId));
  }
  return result;
}
