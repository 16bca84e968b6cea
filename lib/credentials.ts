// Secrets at rest: provider credentials (connections.credentials) and webhook signing secrets
// (webhooks.secret) are stored as AES-256-GCM envelopes, one per row, naming the key that sealed
// them, so several keys can be configured at once while rows move to a new one (rotation).
//
// Envelope: `enc:v1:<key id>:<iv>:<ciphertext>:<tag>` (base64url parts, 12-byte random IV, 16-byte
// tag). The row's table and id are the additional authenticated data: an envelope copied into
// another row does not open there.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const PREFIX = 'enc:v1:';
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;

/** The key id of a key given alone in CREDENTIALS_KEY. */
export const DEFAULT_KEY_ID = 'default';

/** The configured encryption keys: every key that may open a row, and the one that seals. */
export interface Keyring {
  /** Id of the key new envelopes are sealed with. */
  activeId: string;
  keys: ReadonlyMap<string, Buffer>;
}

/** Where an envelope lives: the table and row id it is bound to. */
export interface SecretSlot {
  table: 'connections' | 'webhooks' | 'oauth_apps' | 'oauth_states';
  id: string;
}

/** A problem with a configured key: the message names the variable and the rule, never the value. */
export class KeyringProblem extends Error {
  override name = 'KeyringProblem';
  constructor(
    readonly variable: string,
    rule: string,
  ) {
    super(rule);
  }
}

/** Decodes one base64 key of exactly 32 bytes, or throws a KeyringProblem for `variable`. */
function decodeKey(variable: string, value: string): Buffer {
  const trimmed = value.trim();
  const key = /^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed) ? Buffer.from(trimmed, 'base64') : Buffer.alloc(0);
  if (key.length !== 32) throw new KeyringProblem(variable, 'must be 32 bytes, base64-encoded (e.g. openssl rand -base64 32)');
  return key;
}

/**
 * Builds the keyring from CREDENTIALS_KEY (key id `default`), CREDENTIALS_KEYS (`id:base64,...`)
 * and CREDENTIALS_ACTIVE_KEY_ID. The active id defaults to the only key configured; with several
 * keys it must be named. Returns null when no key is configured at all.
 */
export function parseKeyring(env: { CREDENTIALS_KEY?: string; CREDENTIALS_KEYS?: string; CREDENTIALS_ACTIVE_KEY_ID?: string }): Keyring | null {
  const keys = new Map<string, Buffer>();
  if (env.CREDENTIALS_KEY?.trim()) keys.set(DEFAULT_KEY_ID, decodeKey('CREDENTIALS_KEY', env.CREDENTIALS_KEY));
  for (const entry of (env.CREDENTIALS_KEYS ?? '').split(',').map((e) => e.trim()).filter(Boolean)) {
    const colon = entry.indexOf(':');
    const id = colon > 0 ? entry.slice(0, colon) : '';
    if (!KEY_ID.test(id)) throw new KeyringProblem('CREDENTIALS_KEYS', 'must be a comma-separated list of <id>:<base64 key>, ids of 1-32 letters, digits, _ or -');
    if (keys.has(id)) throw new KeyringProblem('CREDENTIALS_KEYS', `key id '${id}' is given twice`);
    keys.set(id, decodeKey('CREDENTIALS_KEYS', entry.slice(colon + 1)));
  }
  if (keys.size === 0) return null;
  const named = env.CREDENTIALS_ACTIVE_KEY_ID?.trim();
  if (!named && keys.size > 1) {
    throw new KeyringProblem('CREDENTIALS_ACTIVE_KEY_ID', `is required when several keys are configured (one of: ${[...keys.keys()].join(', ')})`);
  }
  const activeId = named || [...keys.keys()][0]!;
  if (!keys.has(activeId)) throw new KeyringProblem('CREDENTIALS_ACTIVE_KEY_ID', `must be one of the configured key ids (${[...keys.keys()].join(', ')})`);
  return { activeId, keys };
}

/**
 * A 32-byte key for `purpose` (e.g. keyed fingerprints), derived from the active key with
 * HKDF-SHA256: never the sealing key itself, and one per purpose. It changes with the active key.
 */
export function derivedKey(keyring: Keyring, purpose: string): Buffer {
  return deriveKey(keyring.keys.get(keyring.activeId)!, purpose);
}

/** `key` derived for `purpose` with HKDF-SHA256 (no salt, info `synctide:<purpose>`), 32 bytes. */
function deriveKey(key: Buffer, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), `synctide:${purpose}`, 32));
}

/**
 * The keyring of `purpose`: every configured key derived as `derivedKey` derives the active one
 * (same ids, same active id), so what it seals opens under any key still configured.
 */
export function derivedKeyring(keyring: Keyring, purpose: string): Keyring {
  const keys = new Map<string, Buffer>();
  for (const [id, key] of keyring.keys) keys.set(id, deriveKey(key, purpose));
  return { activeId: keyring.activeId, keys };
}

/** A new random key, base64: what `npm start` stores when none is configured. */
export function newKeyBase64(): string {
  return randomBytes(32).toString('base64');
}

/** AES-GCM's IV and tag sizes: 12 bytes (the standard nonce) and the full 16-byte tag. */
const IV_BYTES = 12;
const TAG_BYTES = 16;

const aad = (slot: SecretSlot) => Buffer.from(`synctide:${slot.table}:${slot.id}`, 'utf8');

/** Whether `value` is an envelope (rather than a legacy plaintext value). */
export function isEnvelope(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(PREFIX);
}

/** The key id an envelope was sealed with, or null for anything that is not an envelope. */
export function envelopeKeyId(value: unknown): string | null {
  return isEnvelope(value) ? (value.slice(PREFIX.length).split(':', 1)[0] ?? null) : null;
}

/** Seals `plaintext` under the active key, bound to `slot`. */
export function seal(keyring: Keyring, slot: SecretSlot, plaintext: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keyring.keys.get(keyring.activeId)!, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad(slot));
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return `${PREFIX}${keyring.activeId}:${iv.toString('base64url')}:${ct.toString('base64url')}:${cipher.getAuthTag().toString('base64url')}`;
}

/**
 * Opens an envelope bound to `slot`. Throws (naming the key id and the row, never a value) when
 * its key is not configured or the envelope does not authenticate.
 */
export function open(keyring: Keyring, slot: SecretSlot, envelope: string): string {
  const parts = envelope.slice(PREFIX.length).split(':');
  const [kid, iv, ct, tag] = parts;
  const where = `${slot.table} row ${slot.id}`;
  if (!isEnvelope(envelope) || parts.length !== 4 || !kid || iv === undefined || ct === undefined || tag === undefined) {
    throw new Error(`the stored secret of ${where} is not a valid envelope`);
  }
  const key = keyring.keys.get(kid);
  if (!key) throw new Error(`the secret of ${where} is sealed with key '${kid}', which is not configured (CREDENTIALS_KEYS)`);
  // Exactly a 12-byte IV and a 16-byte tag: GCM would otherwise check a tag cut to 4 bytes, which
  // a forger can guess.
  const ivBytes = Buffer.from(iv, 'base64url');
  const tagBytes = Buffer.from(tag, 'base64url');
  if (ivBytes.length !== IV_BYTES || tagBytes.length !== TAG_BYTES) {
    throw new Error(`the secret of ${where} does not open with key '${kid}' (wrong key, or the row was altered)`);
  }
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, ivBytes, { authTagLength: TAG_BYTES });
    decipher.setAAD(aad(slot));
    decipher.setAuthTag(tagBytes);
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  } catch {
    throw new Error(`the secret of ${where} does not open with key '${kid}' (wrong key, or the row was altered)`);
  }
}

/** Seals connection credentials (a JSON object) for connection `id`; null stays null. */
export function sealCredentials(keyring: Keyring, id: string, credentials: Record<string, unknown> | null): string | null {
  return credentials === null ? null : seal(keyring, { table: 'connections', id }, JSON.stringify(credentials));
}

/**
 * The plaintext credentials of connection `id` from their sealed envelope. Anything else stored is
 * an error naming the row (never a value): every process seals legacy plaintext rows at start
 * (`resealSecrets`), so an unsealed object is a row written around the API, which must not be
 * trusted as it is. Only the activities that call the provider do this.
 */
export function openCredentials(keyring: Keyring, id: string, stored: unknown): Record<string, unknown> | null {
  if (stored === null || stored === undefined) return null;
  if (!isEnvelope(stored)) {
    throw new Error(`the stored credentials of connections row ${id} are not sealed; restart a process with the credentials key to seal them`);
  }
  return JSON.parse(open(keyring, { table: 'connections', id }, stored)) as Record<string, unknown>;
}

/** A webhook's signing secret from its stored form (an envelope, or a legacy plaintext secret). */
export function openWebhookSecret(keyring: Keyring, id: string, stored: string): string {
  return isEnvelope(stored) ? open(keyring, { table: 'webhooks', id }, stored) : stored;
}
