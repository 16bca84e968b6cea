import type { Logger } from './logger';

/** A stop step of a process, run in reverse order of registration on shutdown. */
export interface StopStep {
  name: string;
  stop: () => Promise<unknown>;
}

/**
 * Ordered, idempotent process shutdown. On SIGINT/SIGTERM it runs every registered step in
 * reverse order, logs a `shutdown` event per step, and exits; a second signal exits at once.
 */
export class Shutdown {
  private readonly steps: StopStep[] = [];
  private running: Promise<never> | undefined;

  constructor(private readonly logger: Logger) {}

  /** Registers a step; later steps stop first, and one registered while the shutdown runs stops too. */
  add(name: string, stop: () => Promise<unknown>): void {
    this.steps.push({ name, stop });
  }

  /** When the shutdown began (Date.now()), undefined before. */
  startedAt: number | undefined;

  /** Milliseconds left of a grace of `graceMs` counted from the start of the shutdown (all of it before). */
  remainingMs(graceMs: number): number {
    return this.startedAt === undefined ? graceMs : Math.max(0, this.startedAt + graceMs - Date.now());
  }

  /** Whether the shutdown has begun (a signal, or a failed start). */
  get stopping(): boolean {
    return this.running !== undefined;
  }

  /** Installs the SIGINT/SIGTERM handlers. */
  onSignals(): this {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.on(signal, () => {
        if (this.running) {
          this.logger.warn({ event: 'shutdown', signal }, 'second signal: exiting now');
          process.exit(1);
        }
        void this.run(signal, 0);
      });
    }
    return this;
  }

  /** Stops everything and exits with `code`. */
  run(reason: string, code: number): Promise<never> {
    this.startedAt ??= Date.now();
    this.running ??= (async () => {
      this.logger.info({ event: 'shutdown', reason }, 'shutting down');
      // Taken one at a time, last first: a step registered meanwhile (a server spawned by a start
      // still under way) is the next one stopped.
      for (let step = this.steps.pop(); step; step = this.steps.pop()) {
        try {
          await step.stop();
          this.logger.info({ event: 'shutdown', component: step.name }, 'stopped');
        } catch (err) {
          this.logger.error({ event: 'shutdown', component: step.name, err }, 'stop failed');
        }
      }
      this.logger.info({ event: 'shutdown', reason, exitCode: code }, 'shutdown complete');
      process.exit(code);
    })();
    return this.running;
  }
}
