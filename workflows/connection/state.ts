// What a connection workflow shows of itself: the `state` query's answer and the phase search
// attribute. Only the loop changes it; the query reads it.
import { upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { Plan } from '../../policy/schedule';
import type { Phase } from '../../policy/vocabulary';
import type { CarriedState, ConnectionState } from '../../temporal/connection';
import { CONNECTION_ID, PHASE, PROVIDER, TENANT_ID } from '../../temporal/search-attributes';

/** The live state of one run of a connection workflow and the search attributes it has shown. */
export class ConnectionView {
  readonly state: ConnectionState;
  private phaseShown: Phase | null = null;
  private identityShown = false;

  /**
   * `keepCarriedIdentity`: the run does not show again an identity its start already carries (a
   * continue-as-new carries the search attributes over); runs recorded before that show it once
   * per run.
   */
  constructor(connectionId: string, carried: CarriedState | undefined, private readonly keepCarriedIdentity = false) {
    this.state = {
      connection_id: connectionId,
      phase: 'starting',
      next_run_at: carried?.nextRunAt ?? null,
      scheduled_at: null,
      last_jitter_seconds: carried?.lastJitterSeconds ?? null,
      current_job_id: null,
      last_outcome: carried?.lastOutcome ?? null,
      breaker: null,
      pending: [],
      cycles: carried?.cycles ?? 0,
    };
  }

  /** Sets the phase; the search attribute is upserted only when it changes. */
  setPhase(phase: Phase): void {
    this.state.phase = phase;
    if (phase !== this.phaseShown) {
      upsertSearchAttributes([{ key: PHASE, value: phase }]);
      this.phaseShown = phase;
    }
  }

  /** Shows tenant and provider as search attributes, once per run and only when they differ. */
  showIdentity(tenantId: string, providerSlug: string): void {
    if (this.identityShown) return;
    this.identityShown = true;
    if (this.keepCarriedIdentity && this.carriesIdentity(tenantId, providerSlug)) return;
    upsertSearchAttributes([
      { key: CONNECTION_ID, value: this.state.connection_id },
      { key: TENANT_ID, value: tenantId },
      { key: PROVIDER, value: providerSlug },
    ]);
  }

  /** Whether the run's search attributes already show this identity. */
  private carriesIdentity(tenantId: string, providerSlug: string): boolean {
    const shown = workflowInfo().typedSearchAttributes;
    return shown.get(CONNECTION_ID) === this.state.connection_id && shown.get(TENANT_ID) === tenantId && shown.get(PROVIDER) === providerSlug;
  }

  /** Shows when the queued job runs and, for a planned run, the plan behind it. */
  showPlan(scheduledAt: number, plan: Plan | undefined): void {
    this.state.scheduled_at = iso(scheduledAt);
    if (plan) {
      this.state.next_run_at = iso(plan.nextRunAt);
      this.state.last_jitter_seconds = plan.jitterSeconds;
    }
  }

  /** The current job was cancelled: nothing is queued, so no time is shown for a run. */
  jobCancelled(): void {
    this.state.last_outcome = 'cancelled';
    this.state.current_job_id = null;
    this.state.scheduled_at = null;
  }

  /** What the next run continues from. */
  carried(intents: CarriedState['intents']): CarriedState {
    return {
      intents,
      lastOutcome: this.state.last_outcome,
      lastJitterSeconds: this.state.last_jitter_seconds,
      nextRunAt: this.state.next_run_at,
      cycles: this.state.cycles,
    };
  }
}

/** An epoch-milliseconds time as the ISO string the state shows. */
export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
