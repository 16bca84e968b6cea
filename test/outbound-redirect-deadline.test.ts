// The deadline of a provider request (PROVIDER_REQUEST_TIMEOUT_SECONDS) covers the whole request,
// the same-origin redirects it follows included: a provider answering each redirect of a chain
// just within the time of one request could otherwise hold a task up to six times that long (the
// first request and five redirects, each timed on its own). Against a fake provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { providerGet } from '../connectors/provider-http';
import { Transient } from '../connectors/types';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';

afterEach(closeFakeServers);

describe('the deadline of a provider request', () => {
  it('covers the redirects it follows: a chain of slow same-origin redirects fails as timed out, not answered after several times the deadline', async () => {
    // Each hop answers after 40% of the deadline: one hop alone is well within it, three are not.
    const timeoutMs = 1_000;
    const fake = await serve((req, res) => {
      const hop = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('hop') ?? '0');
      setTimeout(() => {
        if (hop < 5) res.writeHead(302, { location: `/slow?hop=${hop + 1}` }).end();
        else res.writeHead(200, { 'content-type': 'application/json' }).end('[]');
      }, timeoutMs * 0.4);
    });
    const outcome = await providerGet(`${fake.url}/slow?hop=0`, { headers: {}, context: 'test', policy: { ...TEST_PROVIDER_POLICY, timeoutMs } }).then(
      (answer) => `answered ${answer.status} after ${fake.requests.length} requests`,
      (err: unknown) => err,
    );
    expect(outcome).toBeInstanceOf(Transient);
    expect((outcome as Error).message).toBe('test: timed out after 1 s (PROVIDER_REQUEST_TIMEOUT_SECONDS)');
    expect(fake.requests.length).toBeLessThan(6);
  });
});
