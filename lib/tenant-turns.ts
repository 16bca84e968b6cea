// How tenants share a process's database pool: the API's requests and the worker's statements take turns.

import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The tenant whose work runs in this async context, whose turns its statements take at the
 * worker's pool (workers/tenant-pool.ts): a scheduled activity's, set around its run by the
 * worker's activity interceptor (workers/lane-gate.ts), or, inside an activity of no tenant that
 * acts on many tenants' rows (the reconcile tick), the row's tenant's around each step on it; ''
 * or unset for work of no tenant.
 */
export const workingFor = new AsyncLocalStorage<string>();

/** A tenant's uses of the pool in flight, and those waiting for a turn (in arrival order). */
interface Tenant {
  running: number;
  waiting: { seq: number; start: () => void }[];
}

/**
 * Turns of tenants at one process's database pool of `places` connections: an API process's
 * requests (a request holds one connection at a time) or a worker's statements and transactions
 * (each holds one). Rules:
 * - a tenant has at most `perTenant` in flight;
 * - tenants that already have one in flight leave the last free place to a tenant with none, so
 *   a tenant's first finds a place however many tenants flood, unless every place is held by a
 *   tenant's first;
 * - one that may not start waits in the process, holding no connection; a place that frees goes
 *   to the waiting tenant with the fewest in flight (the earliest arrival among equals), a
 *   tenant's own in the order they came.
 * Each is thus delayed, never refused.
 */
export class TenantTurns {
  private running = 0;
  private seq = 0;
  private readonly tenants = new Map<string, Tenant>();

  constructor(
    private readonly places: number,
    private readonly perTenant: number,
  ) {}

  /**
   * Waits for `tenantId`'s turn; the answer ends it (call it once, when the request ends). A wait
   * `signal` aborts before its turn came leaves the queue and rejects with the signal's reason
   * (nothing is held for it).
   */
  async take(tenantId: string, signal?: AbortSignal): Promise<() => void> {
    let tenant = this.tenants.get(tenantId);
    if (!tenant) {
      tenant = { running: 0, waiting: [] };
      this.tenants.set(tenantId, tenant);
    }
    const own = tenant;
    if (own.waiting.length === 0 && this.mayStart(own)) this.begin(own);
    else {
      await new Promise<void>((resolve, reject) => {
        const giveUp = () => {
          const at = own.waiting.indexOf(waiter);
          if (at < 0) return;
          own.waiting.splice(at, 1);
          if (own.running === 0 && own.waiting.length === 0) this.tenants.delete(tenantId);
          reject(signal!.reason);
        };
        const waiter = {
          seq: this.seq++,
          start: () => {
            signal?.removeEventListener('abort', giveUp);
            resolve();
          },
        };
        own.waiting.push(waiter);
        signal?.addEventListener('abort', giveUp, { once: true });
        if (signal?.aborted) giveUp();
      });
    }
    return () => this.end(tenantId, own);
  }

  private mayStart(tenant: Tenant): boolean {
    if (tenant.running >= this.perTenant) return false;
    const free = this.places - this.running;
    return free >= (tenant.running === 0 ? 1 : 2);
  }

  private begin(tenant: Tenant): void {
    tenant.running += 1;
    this.running += 1;
  }

  private end(tenantId: string, tenant: Tenant): void {
    tenant.running -= 1;
    this.running -= 1;
    for (;;) {
      let next: Tenant | undefined;
      for (const t of this.tenants.values()) {
        const head = t.waiting[0];
        if (!head || !this.mayStart(t)) continue;
        if (!next || t.running < next.running || (t.running === next.running && head.seq < next.waiting[0]!.seq)) next = t;
      }
      if (!next) break;
      this.begin(next);
      next.waiting.shift()!.start();
    }
    if (tenant.running === 0 && tenant.waiting.length === 0) this.tenants.delete(tenantId);
  }
}
