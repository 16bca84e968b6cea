// The start of every serving process (`npm start`, `npm run api`, `npm run worker`): the one boot
// (infra/boot.ts), then the one start-up step of every process that opens secrets, then what the
// entry point adds. An entry point may wire any layer together; this is the part they share.
import { sealPlaintextSecrets } from '../commands/credentials';
import { runProcess, type BootOptions, type Process } from '../infra/boot';
import type { Config } from '../lib/config';
import type { Keyring } from '../lib/credentials';

/**
 * Boots a process with `config` (parsed once, by its entry point), seals any legacy plaintext
 * secret under `credentials` before it serves or polls, then runs `main`. Failures and signals
 * are handled as `runProcess` handles them.
 */
export function runService(config: Config, credentials: Keyring, options: BootOptions, main: (proc: Process) => Promise<void>): void {
  runProcess(config, options, async (proc) => {
    await sealPlaintextSecrets({ pool: proc.pool, credentials }, proc.logger);
    await main(proc);
  });
}
