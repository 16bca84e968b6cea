import type { MiddlewareHandler } from 'hono';
import type { ApiEnv } from '../env';

/** A tenant's requests in flight in this process, and those waiting for a turn (in arrival order). */
interface Tenant {
  running: number;
  waiting: { seq: number; start: () => void }[];
}

/**
 * Turns of tenant keys' requests at one API process's database pool, `places` connections of
 * which a request holds one at a time. Rules:
 * - a tenant has at most `perTenant` requests in flight;
 * - tenants that already have a request in flight leave the last free place to a tenant with
 *   none, so a tenant's first request finds a place however many tenants flood, unless every
 *   place is held by a tenant's first request;
 * - a request that may not start waits in the process, holding no connection; a place that frees
 *   goes to the waiting tenant with the fewest requests in flight (the earliest arrival among
 *   equals), a tenant's own requests in the order they came.
 * A request is thus delayed, never refused (the per-key rate limit bounds how many wait).
 */
export class TenantTurns {
  private running = 0;
  private seq = 0;
  private readonly tenants = new Map<string, Tenant>();

  constructor(
    private readonly places: number,
    private readonly perTenant: number,
  ) {}

  /** Waits for `tenantId`'s turn; the answer ends it (call it once, when the request ends). */
  async take(tenantId: string): Promise<() => void> {
    let tenant = this.tenants.get(tenantId);
    if (!tenant) {
      tenant = { running: 0, waiting: [] };
      this.tenants.set(tenantId, tenant);
    }
    const own = tenant;
    if (own.waiting.length === 0 && this.mayStart(own)) this.begin(own);
    else await new Promise<void>((start) => own.waiting.push({ seq: this.seq++, start }));
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

/**
 * Holds tenant keys' requests to their turns (TenantTurns) at a pool of `places` connections, at
 * most `perTenant` of one tenant's at once. The admin key is not held.
 */
export function tenantTurns(places: number, perTenant: number): MiddlewareHandler<ApiEnv> {
  const turns = new TenantTurns(places, perTenant);
  return async (c, next) => {
    const principal = c.get('principal');
    if (principal.kind !== 'tenant') return next();
    const done = await turns.take(principal.tenantId);
    try {
      await next();
    } finally {
      done();
    }
  };
}
