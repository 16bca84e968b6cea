-- Up Migration

-- A sync requested while a job of its type runs that does not sync every resource type it asks
-- for is queued behind that job (its claim waits until the running one has ended), so no request
-- is answered with a job that never syncs what it asked for. The one-active-job rule of
-- non-backfill jobs becomes two: at most one queued and at most one running (running or
-- retrying) job per connection and job_type. Two jobs of one connection and type still never run
-- at once: the second index guards every claim. Backfills keep one active per connection.
DROP INDEX sync_jobs_one_active_per_type;

CREATE UNIQUE INDEX sync_jobs_one_queued_per_type ON sync_jobs (connection_id, job_type)
  WHERE status = 'queued' AND trigger <> 'backfill';

CREATE UNIQUE INDEX sync_jobs_one_running_per_type ON sync_jobs (connection_id, job_type)
  WHERE status IN ('running', 'retrying') AND trigger <> 'backfill';

-- Down Migration

-- Fails while a connection has a job queued behind a running one of its type (cancel it first).
DROP INDEX sync_jobs_one_running_per_type;
DROP INDEX sync_jobs_one_queued_per_type;
CREATE UNIQUE INDEX sync_jobs_one_active_per_type ON sync_jobs (connection_id, job_type)
  WHERE status IN ('queued', 'running', 'retrying') AND trigger <> 'backfill';
