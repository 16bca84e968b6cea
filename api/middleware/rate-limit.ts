import { returnToken, takeToken, type BucketLimits, type TakeResult } from '../../policy/token-bucket';

/** Buckets kept per map; the least recently used are dropped beyond this many. */
const MAX_BUCKETS = 10_000;

/**
 * Token buckets by id (an API key, a client address) in this process's memory, at most
 * MAX_BUCKETS of them (the least recently used dropped first: a dropped bucket comes back full).
 * Not shared through Postgres on purpose: that would cost a write per request. With several API
 * processes behind a balancer each keeps its own (the limit scales with them): each replica is
 * configured with its share of the deployment's limit (docs/security.md).
 */
export class Buckets {
  private readonly buckets = new Map<string, TakeResult['state']>();

  constructor(
    private readonly limits: BucketLimits,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Gives back a token `take` took from `id` for a request that did not count; a bucket full again
   * is dropped (a missing one is full), so ids that never counted keep no bucket.
   */
  give(id: string): void {
    const state = returnToken(this.limits, this.buckets.get(id), this.now());
    if (state.tokens >= this.limits.burst) this.buckets.delete(id);
    else this.buckets.set(id, state);
  }

  /** Takes a token from `id`: null when there was one, else seconds until there is. */
  take(id: string): number | null {
    const taken = takeToken(this.limits, this.buckets.get(id), this.now());
    this.buckets.delete(id);
    this.buckets.set(id, taken.state);
    if (this.buckets.size > MAX_BUCKETS) this.buckets.delete(this.buckets.keys().next().value!);
    return taken.allowed ? null : taken.retryAfterSeconds;
  }
}
