import { deliveryShare, DEFERRED_WAITING_MS, mayAttemptDelivery } from '../policy/delivery-shares';

/**
 * The webhook delivery attempts one worker process runs, by tenant (policy/delivery-shares.ts):
 * an attempt asks for a place before it calls the receiver and gives it back when it is done; an
 * attempt refused a place is deferred, and its tenant counts as waiting for a while.
 */
export class DeliveryShares {
  private running = 0;
  private readonly runningByTenant = new Map<string, number>();
  /** Tenants refused a place, with when they last were (`now`). */
  private readonly waitingSince = new Map<string, number>();

  constructor(
    /** WEBHOOK_DELIVERY_SLOTS: attempts running at once in this process. */
    readonly slots: number,
    /** Milliseconds on a monotonic clock: a wall clock set back would keep tenants counted as waiting for as long. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Tenants running attempts now or refused one lately (those refused long ago are forgotten). */
  private tenantsWithWork(tenant: string): number {
    const since = this.now() - DEFERRED_WAITING_MS;
    for (const [t, at] of this.waitingSince) if (at < since) this.waitingSince.delete(t);
    return new Set([...this.runningByTenant.keys(), ...this.waitingSince.keys(), tenant]).size;
  }

  /**
   * A place for one attempt of `tenant`, or null when there is none: the slots are all taken, or the
   * tenant runs its share already. The place is given back by calling the function returned (once).
   */
  take(tenant: string): (() => void) | null {
    const tenantRunning = this.runningByTenant.get(tenant) ?? 0;
    const share = deliveryShare(this.slots, this.tenantsWithWork(tenant));
    if (!mayAttemptDelivery({ running: this.running, slots: this.slots, tenantRunning, share })) {
      this.waitingSince.set(tenant, this.now());
      return null;
    }
    this.waitingSince.delete(tenant);
    this.running++;
    this.runningByTenant.set(tenant, tenantRunning + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.running--;
      const left = (this.runningByTenant.get(tenant) ?? 1) - 1;
      if (left > 0) this.runningByTenant.set(tenant, left);
      else this.runningByTenant.delete(tenant);
    };
  }
}
