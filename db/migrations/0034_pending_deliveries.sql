-- Up Migration

-- The reconcile tick looks at every pending delivery older than a few seconds, oldest first, and
-- restarts the workflow of each whose workflow is not running (it died, or a redelivery found
-- the previous run still closing), not only of those never started: Temporal, not a column,
-- says whether a delivery is being worked on. `workflow_started_at` is no longer written; it and
-- its index stay (migrations are additive) for processes of the previous version during a
-- rolling upgrade.
CREATE INDEX webhook_deliveries_pending_idx ON webhook_deliveries (created_at) WHERE status = 'pending';

-- Down Migration

DROP INDEX webhook_deliveries_pending_idx;
