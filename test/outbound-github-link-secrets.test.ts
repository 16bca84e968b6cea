// A GitHub (Enterprise) server's Link to the next page that carries the connection's token (in its
// query, or as userinfo: `x-access-token:<token>@`, as git URLs carry one) is never followed nor
// made the page token: page tokens are stored with the task's progress and heartbeated to
// Temporal, where no secret may be. Against a fake GitHub on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { githubConnector } from '../connectors/github';
import { Permanent } from '../connectors/types';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';

afterEach(closeFakeServers);

const TOKEN = 'ghp_LinkEchoTestToken_0123456789abcdef';

describe('github connector: a Link carrying the token', () => {
  it('fails for good, quoting the Link redacted and without userinfo, and makes no page token of it', async () => {
    let link = '';
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', link: `<${link}>; rel="next"` });
      res.end(JSON.stringify([{ id: 1, number: 1, title: 'one', updated_at: '2025-01-01T00:00:01Z' }]));
    });
    const host = new URL(fake.url).host;
    const links = [
      `${fake.url}/repos/octo/hello/pulls?page=2&access_token=${TOKEN}`,
      `${fake.url}/repos/octo/hello/pulls?page=2&sig=${encodeURIComponent(`{"t":"${TOKEN}"}`)}`,
      `http://x-access-token:${TOKEN}@${host}/repos/octo/hello/pulls?page=2`,
    ];
    for (link of links) {
      const outcome = await githubConnector
        .fetchPage({ resource: 'pull_requests', since: null, until: null, pageToken: null, config: { base_url: fake.url, repositories: ['octo/hello'], resource_types: ['pull_requests'] }, credentials: { token: TOKEN }, policy: TEST_PROVIDER_POLICY })
        .then((page) => `page token ${Buffer.from(page.nextPageToken ?? '', 'base64url').toString('utf8')}`, (err: unknown) => err);
      expect(outcome, link).toBeInstanceOf(Permanent);
      expect((outcome as Error).message, link).toMatch(/^github connector: the next URL from the Link header carries a credential \(not stored, not followed\): '/);
      expect((outcome as Error).message, link).not.toContain(TOKEN);
      expect((outcome as Error).message, link).not.toContain('x-access-token');
    }
  });
});
