/**
 * Workflow starts that run after the answer, off the request path. A requested job's durable fact
 * is its inserted row (the outbox): the request is answered once the row is committed and its
 * workflow is started just after, retried a few times; if the process dies first, the reconcile
 * tick starts the workflow of any requested job still queued a minute later. The caller sees
 * "time to running" instead of the start's latency in the answer.
 */
export class BackgroundStarts {
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    /** Told when a start failed every attempt (the reconcile tick will still adopt the job). */
    private readonly onFailure: (err: unknown, what: string) => void,
    private readonly attempts = 3,
    private readonly retryDelayMs = 250,
  ) {}

  /** Runs `start` in the background, retrying it; never rejects. */
  run(what: string, start: () => Promise<unknown>): void {
    const task = (async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          await start();
          return;
        } catch (err) {
          if (attempt >= this.attempts) {
            this.onFailure(err, what);
            return;
          }
          await new Promise((r) => setTimeout(r, this.retryDelayMs * attempt));
        }
      }
    })();
    this.inFlight.add(task);
    void task.finally(() => this.inFlight.delete(task));
  }

  /**
   * Waits for the starts under way (on shutdown, so none is cut off needlessly), at most
   * `timeoutMs` when given: a start left unfinished is the reconcile tick's to make.
   */
  async drain(timeoutMs?: number): Promise<void> {
    const all = Promise.all([...this.inFlight]);
    if (timeoutMs === undefined) return void (await all);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }
}
