// A client process that trusts the test CA (test/fixtures/tls/ca.pem): Node reads
// NODE_EXTRA_CA_CERTS only when a process starts, and production code chooses no CAs of its own
// (Node's, plus that variable), so a certificate the CA signed is trusted only in a process started
// with it. `trustingClient` runs this file so: each URL given is asked with postBounded (a webhook
// delivery's request) and providerGet (a connector's), and what each did is printed as JSON.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_PROVIDER_POLICY, providerGet } from '../../connectors/provider-http';
import { postBounded } from '../../lib/outbound';

/** What one request did: its status, or the class and message of its error. */
export type Outcome = { status: number } | { error: string; message: string };

/** The outcomes of postBounded and providerGet for one URL. */
export interface Outcomes {
  post: Outcome;
  get: Outcome;
}

const outcome = (request: Promise<{ status: number }>): Promise<Outcome> =>
  request.then(
    (answer) => ({ status: answer.status }),
    (err: Error) => ({ error: err.name, message: err.message }),
  );

async function main(urls: string[]): Promise<void> {
  const policy = { ...DEFAULT_PROVIDER_POLICY, allowPrivate: true, timeoutMs: 10_000 };
  const results: Outcomes[] = [];
  for (const url of urls) {
    results.push({
      post: await outcome(postBounded(url, '{}', {}, { timeoutMs: 10_000, maxResponseBytes: 1024, allowPrivate: true })),
      get: await outcome(providerGet(url, { headers: {}, policy, context: 'tls test' })),
    });
  }
  process.stdout.write(JSON.stringify(results));
}

/** Runs this file in a process trusting the test CA, asking each of `urls`; resolves with what each request did. */
export function trustingClient(urls: string[], tlsFixtures: string): Promise<Outcomes[]> {
  const file = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, ['--import', 'tsx', file, ...urls], {
    cwd: path.resolve(path.dirname(file), '..', '..'),
    env: { ...process.env, NODE_EXTRA_CA_CERTS: path.join(tlsFixtures, 'ca.pem'), TLS_TRUSTING_CLIENT: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`the trusting client exited ${code}: ${err}`));
      try {
        resolve(JSON.parse(out) as Outcomes[]);
      } catch {
        reject(new Error(`the trusting client printed no JSON: ${out} ${err}`));
      }
    });
  });
}

if (process.env.TLS_TRUSTING_CLIENT === '1' && process.argv[1] === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(String(err));
    process.exit(1);
  });
}
