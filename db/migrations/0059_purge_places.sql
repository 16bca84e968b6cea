-- Up Migration

-- A tenant's purges under way (`running`), counted by every claim of its jobs and by each
-- purge before it deletes: each takes a place of the tenant's running-jobs limit, as its batches
-- hold a worker's activity slot.
CREATE INDEX connection_purges_running_tenant_idx ON connection_purges (tenant_id) WHERE status = 'running';

-- Down Migration

DROP INDEX connection_purges_running_tenant_idx;
