// The local stack's secrets on disk: the embedded Postgres asks for a password (scram-sha-256,
// kept in a 0600 file) instead of trusting every local process, DATA_DIR is private, the admin key
// file is never written through a symlink nor read when others could read it, and a project the
// `postgres` user cannot reach (as root, under a 0700 directory such as /root) fails at once with
// a message saying what to do, instead of `spawn …/initdb EACCES`.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../infra/embedded-postgres';
import { adminKeyProblem, localAdminKey, localCredentialsKey } from '../lib/admin-key';
import { freePort } from '../lib/ports';

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const mode = async (p: string) => (await fs.stat(p)).mode & 0o777;

let scratch: string;
beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-secrets-'));
  // Reachable by the `postgres` user the embedded server runs as under root.
  await fs.chmod(scratch, 0o755);
});
afterAll(async () => {
  await fs.rm(scratch, { recursive: true, force: true });
});

describe('embedded Postgres', () => {
  let server: EmbeddedPostgres | undefined;
  afterAll(async () => {
    await server?.stop();
  });

  it('requires the superuser password kept in a 0600 file, and makes the data directory private', async () => {
    const dataDir = path.join(scratch, 'data', 'postgres');
    server = await startEmbeddedPostgres({ dataDir, port: await freePort(), ephemeral: true });
    expect(server.passwordFile).toBe(path.join(scratch, 'data', 'postgres-password'));
    expect(await mode(server.passwordFile)).toBe(0o600);
    const password = (await fs.readFile(server.passwordFile, 'utf8')).trim();
    expect(password).toMatch(/^[0-9a-f]{48}$/);
    // DATA_DIR: 0700, or 0710 for the postgres group when the server runs as that user.
    expect(await mode(path.join(scratch, 'data'))).toBe(isRoot ? 0o710 : 0o700);

    const withPassword = new pg.Client({ connectionString: server.adminUrl });
    await withPassword.connect();
    const { rows } = await withPassword.query(`select count(*)::int as n from pg_hba_file_rules where auth_method = 'trust'`);
    await withPassword.end();
    expect(rows[0].n).toBe(0);

    for (const url of [server.adminUrl.replace(`:${password}@`, '@'), server.adminUrl.replace(password, 'wrong')]) {
      const client = new pg.Client({ connectionString: url });
      const refused = await client.connect().then(() => null, (err: Error & { code?: string }) => err);
      await client.end().catch(() => undefined);
      expect(refused).not.toBeNull();
      // 28P01 invalid_password; without a password pg refuses before asking the server.
      expect(refused!.code === '28P01' || /password/i.test(refused!.message)).toBe(true);
    }
  });

  it('restarts on the same cluster with the same password file', async () => {
    const dataDir = path.join(scratch, 'data', 'postgres');
    const before = await fs.readFile(path.join(scratch, 'data', 'postgres-password'), 'utf8');
    await server!.stop();
    server = await startEmbeddedPostgres({ dataDir, port: await freePort(), ephemeral: true });
    expect(await fs.readFile(server.passwordFile, 'utf8')).toBe(before);
    const client = new pg.Client({ connectionString: server.adminUrl });
    await client.connect();
    await client.end();
  });

  it('gives a cluster an older version made with trust auth a password and stops trusting', async () => {
    const dataDir = path.join(scratch, 'old', 'postgres');
    const first = await startEmbeddedPostgres({ dataDir, port: await freePort(), ephemeral: true });
    await first.stop();
    // What initdb --auth=trust left behind, and no password file.
    const hbaFile = path.join(dataDir, 'pg_hba.conf');
    await fs.writeFile(hbaFile, (await fs.readFile(hbaFile, 'utf8')).replace(/scram-sha-256/g, 'trust'));
    await fs.rm(first.passwordFile);

    const upgraded = await startEmbeddedPostgres({ dataDir, port: await freePort(), ephemeral: true });
    try {
      const password = (await fs.readFile(upgraded.passwordFile, 'utf8')).trim();
      expect(await mode(upgraded.passwordFile)).toBe(0o600);
      const client = new pg.Client({ connectionString: upgraded.adminUrl });
      await client.connect();
      const { rows } = await client.query(`select count(*)::int as n from pg_hba_file_rules where auth_method = 'trust'`);
      await client.end();
      expect(rows[0].n).toBe(0);
      const wrong = new pg.Client({ connectionString: upgraded.adminUrl.replace(password, 'wrong') });
      const refused = await wrong.connect().then(() => null, (err: { code?: string }) => err);
      await wrong.end().catch(() => undefined);
      expect(refused?.code).toBe('28P01');
    } finally {
      await upgraded.stop();
    }
  });

  it('connects with a password file an operator wrote, whatever characters it holds', async () => {
    const dataDir = path.join(scratch, 'own-password', 'postgres');
    await fs.mkdir(path.dirname(dataDir), { recursive: true, mode: 0o700 });
    const password = 'Ab%41 p@ss:w/rd#?ü';
    await fs.writeFile(path.join(scratch, 'own-password', 'postgres-password'), `${password}\n`, { mode: 0o600 });
    const own = await startEmbeddedPostgres({ dataDir, port: await freePort(), ephemeral: true });
    try {
      for (const url of [own.adminUrl, own.urlFor('postgres')]) {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        await client.end();
      }
    } finally {
      await own.stop();
    }
  });

  it('under a 0700 directory the postgres user cannot enter: fails at once naming it and what to do (as root), or starts (as a user)', async () => {
    const locked = await fs.mkdtemp(path.join(scratch, 'home-'));
    await fs.chmod(locked, 0o700);
    const dataDir = path.join(locked, 'project', '.data', 'postgres');
    const attempt = startEmbeddedPostgres({ dataDir, port: await freePort(), ephemeral: true });
    if (isRoot) {
      const err = await attempt.then(() => null, (e: Error) => e);
      expect(err?.message).toContain(`cannot enter ${locked} (mode 700, owner root)`);
      expect(err?.message).toMatch(/runs as the 'postgres' user/);
      expect(err?.message).toMatch(/Move the project to a directory that user can enter .* or set DATABASE_URL/);
      expect(err?.message).not.toMatch(/EACCES/);
      // Nothing was initialised.
      expect(await fs.stat(path.join(dataDir, 'PG_VERSION')).then(() => true, () => false)).toBe(false);
    } else {
      const started = await attempt;
      await started.stop();
    }
  });
});

describe('the admin key file of npm start', () => {
  it('is generated with mode 0600 in a 0700 DATA_DIR and read back', async () => {
    const dataDir = path.join(scratch, 'key-fresh');
    const first = await localAdminKey(undefined, dataDir);
    expect(first.generated).toBe(true);
    expect(adminKeyProblem(first.key)).toBeUndefined();
    expect(await mode(first.file!)).toBe(0o600);
    expect(await mode(dataDir)).toBe(0o700);
    const second = await localAdminKey(undefined, dataDir);
    expect(second).toEqual({ key: first.key, file: first.file, generated: false });
  });

  it('is never written through a symlink planted in its place', async () => {
    const dataDir = path.join(scratch, 'key-link');
    await fs.mkdir(dataDir, { mode: 0o700 });
    const target = path.join(scratch, 'victim');
    await fs.writeFile(target, 'untouched');
    await fs.symlink(target, path.join(dataDir, 'admin-api-key'));
    await expect(localAdminKey(undefined, dataDir)).rejects.toThrow(/is a symbolic link; refusing/);
    expect(await fs.readFile(target, 'utf8')).toBe('untouched');
  });

  it('is not used when others can read it', async () => {
    const dataDir = path.join(scratch, 'key-open');
    await fs.mkdir(dataDir, { mode: 0o700 });
    const file = path.join(dataDir, 'admin-api-key');
    await fs.writeFile(file, 'f3a9c1e07b5d48e2a6c9f0d1b7e4a352f3a9c1e07b5d48e2\n');
    await fs.chmod(file, 0o644);
    await expect(localAdminKey(undefined, dataDir)).rejects.toThrow(/has mode 0644, not 0600; run chmod 600/);
  });

  it('replaces a key an older version generated that no longer passes the rules', async () => {
    const dataDir = path.join(scratch, 'key-old');
    await fs.mkdir(dataDir, { mode: 0o700 });
    const file = path.join(dataDir, 'admin-api-key');
    await fs.writeFile(file, 'short-old-key-1234\n', { mode: 0o600 });
    const key = await localAdminKey(undefined, dataDir);
    expect(key.generated).toBe(true);
    expect(key.key).not.toBe('short-old-key-1234');
    expect(await mode(file)).toBe(0o600);
  });
});

describe('the credentials key file of npm start (created and read like the admin key)', () => {
  it('is generated with mode 0600 and read back', async () => {
    const dataDir = path.join(scratch, 'ckey-fresh');
    const first = await localCredentialsKey(dataDir);
    expect(first.generated).toBe(true);
    expect(Buffer.from(first.key, 'base64')).toHaveLength(32);
    expect(await mode(first.file)).toBe(0o600);
    expect(await localCredentialsKey(dataDir)).toEqual({ key: first.key, file: first.file, generated: false });
  });

  it('is never written through a symlink planted in its place', async () => {
    const dataDir = path.join(scratch, 'ckey-link');
    await fs.mkdir(dataDir, { mode: 0o700 });
    const target = path.join(scratch, 'ckey-victim');
    await fs.writeFile(target, '');
    await fs.symlink(target, path.join(dataDir, 'credentials-key'));
    await expect(localCredentialsKey(dataDir)).rejects.toThrow(/is a symbolic link; refusing/);
    expect(await fs.readFile(target, 'utf8')).toBe('');
  });

  it('is not used when others can read it', async () => {
    const dataDir = path.join(scratch, 'ckey-open');
    await fs.mkdir(dataDir, { mode: 0o700 });
    const file = path.join(dataDir, 'credentials-key');
    await fs.writeFile(file, `${Buffer.alloc(32, 7).toString('base64')}\n`);
    await fs.chmod(file, 0o644);
    await expect(localCredentialsKey(dataDir)).rejects.toThrow(/has mode 0644, not 0600; run chmod 600/);
  });
});

