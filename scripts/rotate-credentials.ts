// `npm run credentials:rotate`: re-seals every stored credential and webhook secret under the
// active key (CREDENTIALS_ACTIVE_KEY_ID of CREDENTIALS_KEYS). Resumable: run it again after an
// interruption and it continues with the rows not yet under the active key. Safe while workers and
// API processes run, provided they already have every key in CREDENTIALS_KEYS (old and new).
import { resealSecrets } from '../commands/credentials';
import { createPool } from '../db/pool';
import { ConfigError, loadConfigOrExit, requireKeyring } from '../lib/config';

const { config, credentials } = loadConfigOrExit(process.env, (c) => {
  if (!c.DATABASE_URL) throw new ConfigError('Invalid configuration:\n  DATABASE_URL: is required for npm run credentials:rotate');
  return { config: c as typeof c & { DATABASE_URL: string }, credentials: requireKeyring(c, 'npm run credentials:rotate') };
});

const pool = createPool(config.DATABASE_URL, 2);
try {
  const result = await resealSecrets({ pool, credentials }, 'all', (table, done) => process.stdout.write(`  ${table}: ${done} sealed so far\n`));
  process.stdout.write(
    `Sealed ${result.sealed} rows under key '${credentials.activeId}'; ${result.skipped} changed meanwhile; ${result.remaining} not yet under it.\n`,
  );
  process.exitCode = result.remaining === 0 ? 0 : 2;
} catch (err) {
  process.stderr.write(`rotation stopped: ${(err as Error).message}\n(run it again to continue)\n`);
  process.exitCode = 1;
} finally {
  await pool.end();
}
