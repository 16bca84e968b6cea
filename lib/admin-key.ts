import { randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';

/** The shortest admin key accepted: 32 characters (`openssl rand -hex 32` gives 64). */
export const MIN_ADMIN_KEY_LENGTH = 32;

// Words of example and placeholder keys (the README's own example among them): a key containing
// one was typed by a person, not drawn at random.
const PLACEHOLDER_WORDS = ['change-me', 'changeme', 'change_me', 'replace-me', 'replaceme', 'example', 'placeholder', 'your-key', 'your_key', 'secret', 'password', 'admin-key', 'test-key'];

/**
 * Why `key` is not an acceptable admin key, or undefined when it is: at least 32 characters, no
 * placeholder word, and not an obvious pattern (few distinct characters, or mostly runs such as
 * `aaaa` or `0123`). A heuristic against typed keys, not a proof of randomness: generate keys with
 * `openssl rand -hex 32`.
 */
export function adminKeyProblem(key: string): string | undefined {
  const hint = '(generate one with: openssl rand -hex 32)';
  if (key.length < MIN_ADMIN_KEY_LENGTH) return `must be at least ${MIN_ADMIN_KEY_LENGTH} random characters ${hint}`;
  const lower = key.toLowerCase();
  const word = PLACEHOLDER_WORDS.find((w) => lower.includes(w));
  if (word) return `looks like a placeholder (contains "${word}"), not a random key ${hint}`;
  if (new Set(key).size < 10) return `has too few distinct characters to be random ${hint}`;
  let patterned = 0;
  for (let i = 1; i < key.length; i++) {
    const step = key.charCodeAt(i) - key.charCodeAt(i - 1);
    if (step === 0 || step === 1 || step === -1) patterned++;
  }
  if (patterned > (key.length - 1) / 2) return `is mostly repeated or consecutive characters, not random ${hint}`;
  return undefined;
}

/**
 * The key kept in `file` by `npm start`, generated on the first start. The file is created
 * exclusively without following a symlink (a link planted there cannot redirect the write) and
 * must be a regular file of mode 0600 to be read; a key `usable` refuses (an older version's) is
 * replaced. `what` names the file in errors. `generated` tells the caller to show where it is.
 */
async function localKeyFile(
  file: string,
  what: string,
  generate: () => string,
  usable: (key: string) => boolean,
): Promise<{ key: string; file: string; generated: boolean }> {
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const existing = await readKeyFile(file, what);
  if (existing !== undefined && usable(existing)) return { key: existing, file, generated: false };
  // None yet, or one from an older version that no longer passes: replace it.
  if (existing !== undefined) await fs.rm(file);
  const key = generate();
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o600);
  } catch (err) {
    // Another process created it first: use theirs.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      const theirs = await readKeyFile(file, what);
      if (theirs !== undefined) return { key: theirs, file, generated: false };
    }
    throw err;
  }
  try {
    await handle.writeFile(`${key}\n`);
    assertPrivate(file, (await handle.stat()).mode);
  } finally {
    await handle.close();
  }
  return { key, file, generated: true };
}

/**
 * The credentials key of `npm start` when neither CREDENTIALS_KEY nor CREDENTIALS_KEYS is set: one
 * generated on the first start and kept in `<dataDir>/credentials-key`, created and read like the
 * admin key. Losing that file makes the stored credentials unreadable: back it up with the data.
 * A file that is not 32 bytes of base64 is refused, never replaced (it may seal existing secrets);
 * an empty one (a start that died before writing it) is replaced.
 */
export async function localCredentialsKey(dataDir: string): Promise<{ key: string; file: string; generated: boolean }> {
  const file = path.resolve(dataDir, 'credentials-key');
  return localKeyFile(file, 'the credentials key file', () => randomBytes(32).toString('base64'), (key) => {
    // Empty: a start that died between creating and writing it, before anything was sealed.
    if (key === '') return false;
    if (Buffer.from(key, 'base64').length !== 32) throw new Error(`${file} does not hold a 32-byte base64 key; restore it from your backup`);
    return true;
  });
}

/**
 * The admin API key of `npm start`: ADMIN_API_KEY when set; otherwise one generated on the first
 * start and kept in `<dataDir>/admin-api-key` (see localKeyFile), so a local quickstart is secured
 * without setup and the key survives restarts.
 */
export async function localAdminKey(configured: string | undefined, dataDir: string): Promise<{ key: string; file?: string; generated: boolean }> {
  if (configured) return { key: configured, generated: false };
  return localKeyFile(path.resolve(dataDir, 'admin-api-key'), 'the admin key file', () => randomBytes(32).toString('hex'), (key) => !adminKeyProblem(key));
}

/** The key in `file`, undefined when there is none; refuses a symlink or a file others can read. */
async function readKeyFile(file: string, what: string): Promise<string | undefined> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') throw new Error(`${file} is a symbolic link; refusing to use it as ${what} (delete it)`);
    throw err;
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error(`${file} is not a regular file; refusing to use it as ${what}`);
    assertPrivate(file, stat.mode);
    return (await handle.readFile('utf8')).trim();
  } finally {
    await handle.close();
  }
}

/** Throws unless `mode` is 0600: no one but the owner may read the key. */
function assertPrivate(file: string, mode: number): void {
  if ((mode & 0o777) !== 0o600) {
    throw new Error(`${file} has mode ${(mode & 0o777).toString(8).padStart(4, '0')}, not 0600; run chmod 600 on it (or delete it)`);
  }
}
