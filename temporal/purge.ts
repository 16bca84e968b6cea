// Contract of connection purges: one `connection-purge:<purge_id>` workflow removes a deleted
// connection and everything of it, once nothing of the connection runs any more.
/** Workflow type name of a connection purge. */
export const CONNECTION_PURGE_WORKFLOW = 'connectionPurgeWorkflow';

/** The workflow id of purge `purgeId`. */
export const connectionPurgeWorkflowId = (purgeId: string): string => `connection-purge:${purgeId}`;

/** Which purge to run, of which connection. */
export interface ConnectionPurgeInput {
  purgeId: string;
  connectionId: string;
}

/** What one purge activity run did: rows deleted, and whether the connection is gone entirely. */
export interface PurgeProgress {
  deleted: number;
  done: boolean;
}

/** The purge workflow's signature, which clients start it by. */
export type ConnectionPurgeWorkflow = (input: ConnectionPurgeInput) => Promise<{ deleted: number }>;
