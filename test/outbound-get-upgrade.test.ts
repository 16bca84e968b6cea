// A provider's GET or a token request answered 101 Switching Protocols (an upgrade Synctide never
// asks for) fails at once as a malformed answer, naming it: Node drops such an answer's connection
// and emits neither a response nor an error, so the request waited for its whole deadline and then
// failed as timed out, as if the server had never answered. Against a real server on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { getBounded, MalformedAnswer, postBoundedForAnswer } from '../lib/outbound';
import { closeFakeServers, serveRaw } from './helpers/fake-server';

afterEach(async () => {
  await closeFakeServers();
});

const SWITCHING = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n';

describe('an answer switching protocols (101) to a request that asked for no upgrade', () => {
  it('fails a GET and a token POST as a malformed answer naming the 101, not as timed out at the deadline', async () => {
    const raw = await serveRaw(SWITCHING);
    const opts = { timeoutMs: 20_000, maxBodyBytes: 1024, allowPrivate: true };
    for (const request of [() => getBounded(`${raw.url}/`, {}, opts), () => postBoundedForAnswer(`${raw.url}/token`, 'grant_type=x', {}, opts)]) {
      const err = await request().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(MalformedAnswer);
      expect((err as Error).message).toBe('its response switches protocols (101 Switching Protocols), an upgrade Synctide never asks for');
    }
    expect(raw.requests).toHaveLength(2);
  }, 60_000);
});
