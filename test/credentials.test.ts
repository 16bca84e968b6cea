// Pure units of tenant security: credential envelopes (AES-256-GCM with key ids, bound to their
// row) and the per-key token bucket. No I/O, no clocks: times are passed in.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { metricsRoutes } from '../lib/http';
import { envelopeKeyId, isEnvelope, open, openCredentials, openWebhookSecret, parseKeyring, seal, sealCredentials } from '../lib/credentials';
import { takeToken, type BucketState } from '../policy/token-bucket';

const A = Buffer.alloc(32, 1).toString('base64');
const B = Buffer.alloc(32, 2).toString('base64');
const slot = { table: 'connections' as const, id: '11111111-1111-4111-8111-111111111111' };

describe('credential envelopes', () => {
  it('seal under the active key and open with any configured key; the plaintext is nowhere in the envelope', () => {
    const old = parseKeyring({ CREDENTIALS_KEYS: `old:${A}` })!;
    const both = parseKeyring({ CREDENTIALS_KEYS: `old:${A},new:${B}`, CREDENTIALS_ACTIVE_KEY_ID: 'new' })!;
    const token = 'ghp_secret_value_0123456789';
    const underOld = sealCredentials(old, slot.id, { token })!;
    expect(isEnvelope(underOld)).toBe(true);
    expect(envelopeKeyId(underOld)).toBe('old');
    expect(underOld).not.toContain(token);
    expect(Buffer.from(underOld.split(':').slice(3).join(''), 'base64url').toString('latin1')).not.toContain(token);
    // A keyring with both keys opens the old envelope, and seals new ones under `new`.
    expect(openCredentials(both, slot.id, underOld)).toEqual({ token });
    expect(envelopeKeyId(seal(both, slot, 'x'))).toBe('new');
    // Two seals of one value differ (random IV).
    expect(seal(old, slot, token)).not.toBe(seal(old, slot, token));
  });

  it('refuses an envelope of an unconfigured key, of another row, or altered, naming the key and row but no value', () => {
    const old = parseKeyring({ CREDENTIALS_KEYS: `old:${A}` })!;
    const other = parseKeyring({ CREDENTIALS_KEYS: `new:${B}` })!;
    const sealed = seal(old, slot, 'top-secret');
    expect(() => open(other, slot, sealed)).toThrow(/sealed with key 'old', which is not configured/);
    // Bound to its row: copied into another connection it does not open.
    expect(() => open(old, { ...slot, id: '22222222-2222-4222-8222-222222222222' }, sealed)).toThrow(/does not open with key 'old'/);
    expect(() => open(old, { ...slot, table: 'webhooks' }, sealed)).toThrow(/does not open/);
    const parts = sealed.split(':');
    parts[4] = Buffer.from('tampered-ciphertext').toString('base64url');
    expect(() => open(old, slot, parts.join(':'))).toThrow(/does not open/);
    try {
      open(other, slot, sealed);
    } catch (err) {
      expect((err as Error).message).not.toContain('top-secret');
    }
  });

  it('refuses a tag cut short and an unsealed credentials object (the start-up step seals legacy rows first); reads a legacy webhook secret', () => {
    const ring = parseKeyring({ CREDENTIALS_KEY: A })!;
    expect(ring.activeId).toBe('default');
    const sealed = seal(ring, slot, 'top-secret');
    const parts = sealed.split(':');
    // GCM checks a tag cut to its first 4 bytes unless the length is enforced: a forger's 2^32 guesses.
    parts[5] = Buffer.from(parts[5]!, 'base64url').subarray(0, 4).toString('base64url');
    expect(() => open(ring, slot, parts.join(':'))).toThrow(/does not open/);
    // No plaintext fallback: an object that is not an envelope is an error that names the row, never the value.
    expect(() => openCredentials(ring, slot.id, { token: 'legacy-value' })).toThrow(`the stored credentials of connections row ${slot.id} are not sealed`);
    try {
      openCredentials(ring, slot.id, { token: 'legacy-value' });
    } catch (err) {
      expect((err as Error).message).not.toContain('legacy-value');
    }
    expect(openCredentials(ring, slot.id, null)).toBeNull();
    expect(openWebhookSecret(ring, slot.id, 'whsec_legacy')).toBe('whsec_legacy');
    const hook = { table: 'webhooks' as const, id: slot.id };
    expect(openWebhookSecret(ring, slot.id, seal(ring, hook, 'whsec_new'))).toBe('whsec_new');
  });

  it('parses keyrings and names the variable of a bad key without its value', () => {
    expect(parseKeyring({})).toBeNull();
    expect(() => parseKeyring({ CREDENTIALS_KEY: 'c2hvcnQ=' })).toThrow(/32 bytes, base64/);
    expect(() => parseKeyring({ CREDENTIALS_KEYS: `bad id:${A}` })).toThrow(/comma-separated list of <id>:<base64 key>/);
    expect(() => parseKeyring({ CREDENTIALS_KEYS: `a:${A},a:${B}` })).toThrow(/key id 'a' is given twice/);
    try {
      parseKeyring({ CREDENTIALS_KEYS: 'k:not-a-real-key-value' });
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).not.toContain('not-a-real-key-value');
    }
  });
});

describe('per-key token bucket', () => {
  const limits = { ratePerSecond: 2, burst: 3 };

  it('allows a burst, then refuses with the seconds until the next token, and refills with time', () => {
    let state: BucketState | undefined;
    const results = [];
    for (let i = 0; i < 4; i++) {
      const r = takeToken(limits, state, 1_000);
      state = r.state;
      results.push(r.allowed);
    }
    expect(results).toEqual([true, true, true, false]);
    const refused = takeToken(limits, state, 1_000);
    expect(refused).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    // Half a second later one token (2 per second) is back; never more than the burst.
    expect(takeToken(limits, refused.state, 1_500).allowed).toBe(true);
    expect(takeToken(limits, refused.state, 1_000_000).state.tokens).toBe(2);
  });

  it('says how long to wait at a slow rate', () => {
    const slow = { ratePerSecond: 0.1, burst: 1 };
    const first = takeToken(slow, undefined, 0);
    expect(first.allowed).toBe(true);
    expect(takeToken(slow, first.state, 0)).toMatchObject({ allowed: false, retryAfterSeconds: 10 });
  });
});

describe('/metrics behind a bearer key', () => {
  it('answers 401 without the key (constant-time compare) and the metrics with it', async () => {
    const registry = new Registry();
    const app = metricsRoutes(registry, undefined, 'worker-metrics-admin-key');
    expect((await app.request('/metrics')).status).toBe(401);
    expect((await app.request('/metrics', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const ok = await app.request('/metrics', { headers: { authorization: 'Bearer worker-metrics-admin-key' } });
    expect(ok.status).toBe(200);
    expect((await metricsRoutes(registry).request('/metrics')).status).toBe(200);
  });
});
