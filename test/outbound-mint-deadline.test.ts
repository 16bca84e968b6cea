// The deadline of a GitHub App installation token request (PROVIDER_REQUEST_TIMEOUT_SECONDS)
// covers the mint as a whole: the request made again on GitHub's clock after GitHub refused the
// JWT's times gets what the first left, so a mint takes at most one deadline (what the credential's
// renewal lease, the deadline plus 10 s, is sized for). Against a fake GitHub on 127.0.0.1.
import { generateKeyPairSync } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { MintFailed, mintInstallationToken } from '../lib/github-app';
import { closeFakeServers, serve } from './helpers/fake-server';

afterEach(closeFakeServers);

describe('the deadline of an installation token mint', () => {
  it('covers the request made again on GitHub\'s clock: two slow answers fail the mint as timed out', async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const timeoutMs = 1_000;
    // Each answer comes after 60% of the deadline: one alone is within it, two are not.
    const github = await serve((_req, res) => {
      setTimeout(() => {
        res.writeHead(401, { 'content-type': 'application/json', date: new Date(Date.now() + 3_600_000).toUTCString() });
        res.end(JSON.stringify({ message: "'Expiration time' claim ('exp') is too far in the future" }));
      }, timeoutMs * 0.6);
    });
    const outcome = await mintInstallationToken(
      { appId: 1, installationId: 2, privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), apiBase: github.url },
      { allowPrivate: true, timeoutMs, maxResponseBytes: 1 << 20 },
    ).then(() => 'minted', (err: unknown) => err);
    expect(outcome).toBeInstanceOf(MintFailed);
    expect((outcome as Error).message).toBe('the installation token request failed: timed out');
  });
});
