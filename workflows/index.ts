// Every workflow the Synctide worker runs.
export { connectionWorkflow } from './connection';
export { immediateSyncWorkflow } from './immediate-sync';
export { reconcileWorkflow } from './reconcile';
export { syncJobWorkflow } from './sync-job';
