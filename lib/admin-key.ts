import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * The credentials key of `npm start` when neither CREDENTIALS_KEY nor CREDENTIALS_KEYS is set: one
 * generated on the first start and kept in `<dataDir>/credentials-key` (mode 0600, like the admin
 * key). Losing that file makes the stored credentials unreadable: back it up with the data.
 */
export async function localCredentialsKey(dataDir: string): Promise<{ key: string; file: string; generated: boolean }> {
  const file = path.resolve(dataDir, 'credentials-key');
  try {
    const key = (await fs.readFile(file, 'utf8')).trim();
    if (key) return { key, file, generated: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const key = randomBytes(32).toString('base64');
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, `${key}\n`, { mode: 0o600 });
  return { key, file, generated: true };
}

/**
 * The admin API key of `npm start`: ADMIN_API_KEY when set; otherwise one generated on the first
 * start and kept in `<dataDir>/admin-api-key` (mode 0600), so a local quickstart is secured
 * without setup and the key survives restarts. `generated` tells the caller to show where it is.
 */
export async function localAdminKey(configured: string | undefined, dataDir: string): Promise<{ key: string; file?: string; generated: boolean }> {
  if (configured) return { key: configured, generated: false };
  const file = path.resolve(dataDir, 'admin-api-key');
  try {
    const key = (await fs.readFile(file, 'utf8')).trim();
    if (key.length >= 16) return { key, file, generated: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const key = randomBytes(32).toString('hex');
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, `${key}\n`, { mode: 0o600 });
  return { key, file, generated: true };
}
