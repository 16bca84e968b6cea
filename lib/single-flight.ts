/**
 * `read` behind a short cache and one in-flight call: callers within `ttlMs` of the last answer
 * get that answer, and callers while a read is running share it, so a burst of probes or scrapes
 * costs one query however many arrive. A failed read is shared by the callers that waited for it
 * but not cached: the next caller tries again. `now` is injectable for tests.
 */
export function singleFlight<T>(read: () => Promise<T>, ttlMs: number, now: () => number = () => Date.now()): () => Promise<T> {
  let cached: { at: number; value: T } | undefined;
  let inFlight: Promise<T> | undefined;
  return () => {
    if (cached && now() - cached.at < ttlMs) return Promise.resolve(cached.value);
    if (inFlight) return inFlight;
    const started = read().then(
      (value) => {
        cached = { at: now(), value };
        return value;
      },
    );
    inFlight = started;
    // Cleared whatever the outcome, so a failure is retried by the next caller.
    void started.then(
      () => undefined,
      () => undefined,
    ).finally(() => {
      if (inFlight === started) inFlight = undefined;
    });
    return started;
  };
}
