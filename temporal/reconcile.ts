// Contract of the reconcile tick: one long-running workflow per namespace.

/** Workflow type name of the reconcile tick. */
export const RECONCILE_WORKFLOW = 'reconcileWorkflow';

/** Input of the reconcile workflow. */
export interface ReconcileInput {
  tickSeconds: number;
  /** Finished jobs older than this are deleted, once a day. Default 7. */
  retentionDays?: number;
  /** When retention cleanup last ran (epoch ms), carried across continue-as-new. */
  lastRetentionAt?: number;
}

/** The reconcile workflow's signature, which clients start it by. */
export type ReconcileWorkflow = (input: ReconcileInput) => Promise<never>;
