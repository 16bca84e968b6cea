// What a process's shutdown leaves to the clients and children of the process: requests in flight
// get their answers, and nothing it started outlives it.
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { listen } from '../lib/http';

describe('the API server stopped at shutdown', () => {
  /** An app whose `POST /work` answers once `finish` is called; `entered` resolves when it is under way. */
  function slowApp() {
    let enter!: () => void;
    const entered = new Promise<void>((resolve) => (enter = resolve));
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const app = new Hono();
    // A command under way: its row written, its workflow being signalled.
    app.post('/work', async (c) => {
      enter();
      await finished;
      return c.json({ done: true }, 201);
    });
    return { app, entered, finish };
  }

  const post = (url: string) =>
    fetch(`${url}/work`, { method: 'POST' }).then(
      async (res) => ({ status: res.status, connection: res.headers.get('connection'), body: await res.json() }),
      (err: Error) => ({ status: 0, connection: null, body: String((err.cause as Error | undefined)?.message ?? err.message) }),
    );

  it('lets a request in flight get its answer before the server closes (the `http` shutdown step of npm run api)', async () => {
    const { app, entered, finish } = slowApp();
    const server = await listen(app, '127.0.0.1', 0);
    const answer = post(server.url);
    await entered;
    // SIGTERM: shutdown runs the `http` step (server.close()) while the request is in flight.
    const closed = server.close();
    finish();
    await closed;
    // The answer ends its keep-alive connection: the close does not wait for the client to drop it.
    expect(await answer).toEqual({ status: 201, connection: 'close', body: { done: true } });
  });

  it('cuts a request that is still unanswered at the end of the grace, so the shutdown goes on', async () => {
    const { app, entered, finish } = slowApp();
    const server = await listen(app, '127.0.0.1', 0);
    const answer = post(server.url);
    await entered;
    await server.close(50);
    expect(await answer).toMatchObject({ status: 0 });
    finish();
  });
});
