-- Up Migration

-- The schedule's last run (L of schedule planning) is the latest finished job the connection's
-- scheduler created itself (trigger schedule or manual), whatever its type and however it ended,
-- cancelled included: a cancelled scheduled job is its slot's run, and a sync-now full job counts
-- as much as an incremental one. API syncs and backfills are not the schedule's runs. Jobs failed
-- as abandoned by a restarted connection workflow are left out, so the new run catches up at once.
-- This partial index makes that lookup one index probe however many jobs a connection kept.
CREATE INDEX sync_jobs_schedule_runs_idx ON sync_jobs (connection_id, finished_at DESC)
  WHERE trigger IN ('schedule', 'manual') AND status IN ('completed', 'failed', 'cancelled') AND abandoned_at IS NULL;

-- Down Migration

DROP INDEX sync_jobs_schedule_runs_idx;
