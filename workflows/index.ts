// Every workflow the Synctide worker runs, registered under these export names (the workflow types
// of the contract modules in temporal/).
export { connectionWorkflow } from './connection/workflow';
export { immediateSyncWorkflow } from './immediate-sync';
export { reconcileWorkflow } from './reconcile';
export { syncJobWorkflow } from './sync-job/workflow';
export { webhookDeliveryWorkflow } from './webhook-delivery';
export { connectionPurgeWorkflow } from './connection-purge';
