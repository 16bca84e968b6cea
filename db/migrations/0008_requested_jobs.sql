-- Up Migration

-- Jobs requested over the API (POST /sync, POST /jobs/schedule) run in their own `sync-job:<id>`
-- workflow beside the connection's scheduler. A backfill (trigger 'backfill') covers a window of
-- its own, so it must not collide with the connection's queued scheduled job of the same type:
-- the one-active-job rule now applies to non-backfill jobs per (connection, job_type), and
-- separately to backfills, one active per connection.
DROP INDEX sync_jobs_one_active_per_type;

CREATE UNIQUE INDEX sync_jobs_one_active_per_type ON sync_jobs (connection_id, job_type)
  WHERE status IN ('queued', 'running', 'retrying') AND trigger <> 'backfill';

CREATE UNIQUE INDEX sync_jobs_one_active_backfill ON sync_jobs (connection_id)
  WHERE status IN ('queued', 'running', 'retrying') AND trigger = 'backfill';

-- Listing jobs newest first with keyset pagination (GET /jobs).
CREATE INDEX sync_jobs_created_at_id_idx ON sync_jobs (created_at DESC, id DESC);
DROP INDEX sync_jobs_created_at_idx;

-- Down Migration

CREATE INDEX sync_jobs_created_at_idx ON sync_jobs (created_at);
DROP INDEX sync_jobs_created_at_id_idx;
DROP INDEX sync_jobs_one_active_backfill;
DROP INDEX sync_jobs_one_active_per_type;
CREATE UNIQUE INDEX sync_jobs_one_active_per_type ON sync_jobs (connection_id, job_type)
  WHERE status IN ('queued', 'running', 'retrying');
