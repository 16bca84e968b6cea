import net from 'node:net';

// Ports handed out for later use are drawn below Linux's default ephemeral range (32768–60999):
// a port the OS picked from that range and released can be taken by any outgoing connection's
// local end before its new owner binds it (a fresh-clone CI run lost `npm start` to that:
// EADDRINUSE seconds after the port was found free, while other tests opened connections).
const LOW = 20_000;
const HIGH = 32_767;
const TRIES = 50;

/** Whether 127.0.0.1:`port` can be listened on now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port the OS picks (from the ephemeral range): the fallback when none below it is free. */
function osPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** A free TCP port on 127.0.0.1, for a server started later: random below the ephemeral range. */
export async function freePort(): Promise<number> {
  for (let i = 0; i < TRIES; i++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW + 1));
    if (await canListen(port)) return port;
  }
  return osPort();
}
