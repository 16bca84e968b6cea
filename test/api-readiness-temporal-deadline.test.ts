// The API's readiness asks Temporal with a deadline on the call itself, as the worker's does: a
// server that takes the call and never answers makes /readyz answer `unreachable` within the
// check's time, and the call is ended then too, not left open behind the probe (one more every
// readiness period for as long as the server stays silent).
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkReadiness } from '../infra/readiness';
import { useTestDatabase } from './helpers/database';
import { eventually } from './helpers/worker';

/** A call the silent server received: its headers, and whether the client has ended it. */
interface ReceivedCall {
  path: string;
  grpcTimeout: string | undefined;
  ended: boolean;
}

/** A gRPC server (HTTP/2 without TLS, as Temporal's frontend) that takes every call and answers none. */
let server: http2.Http2Server;
let address: string;
const calls: ReceivedCall[] = [];
const sessions = new Set<http2.ServerHttp2Session>();
beforeAll(async () => {
  server = http2.createServer();
  server.on('session', (session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });
  server.on('stream', (stream, headers) => {
    const call: ReceivedCall = { path: String(headers[':path']), grpcTimeout: headers['grpc-timeout'] as string | undefined, ended: false };
    calls.push(call);
    stream.on('close', () => (call.ended = true));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const session of sessions) session.destroy();
  await new Promise((resolve) => server?.close(resolve));
});

describe('API readiness while Temporal takes calls and never answers', () => {
  const db = useTestDatabase();

  it('answers temporal unreachable and leaves no call to Temporal open behind it', async () => {
    const connection = Connection.lazy({ address });
    try {
      const temporal = new Client({ connection });
      const readiness = await checkReadiness({ pool: db.pool, temporal });
      expect(readiness).toMatchObject({ ready: false, checks: { postgres: 'ok', temporal: 'unreachable' } });

      const asked = calls.filter((c) => c.path === '/temporal.api.workflowservice.v1.WorkflowService/GetSystemInfo');
      expect(asked).toHaveLength(1);
      // The server never answers: only the call's own deadline ends it on the client's side.
      await eventually(async () => (asked.every((c) => c.ended) ? true : undefined), { timeoutMs: 10_000, describe: async () => asked });
      expect(asked[0]!.grpcTimeout).toBeDefined();
    } finally {
      await connection.close();
    }
  }, 60_000);
});
