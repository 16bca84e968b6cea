// Every workflow the Synctide worker runs.
export { connectionWorkflow } from './connection';
export { reconcileWorkflow } from './reconcile';
export { syncJobWorkflow } from './sync-job';
