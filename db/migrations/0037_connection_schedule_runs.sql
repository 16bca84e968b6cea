-- Up Migration

-- What schedule planning needs to know about a connection's past jobs, kept on the connection
-- because retention deletes job rows (after RETENTION_DAYS): planning from job rows alone forgot
-- the schedule's last run (a weekly cron then ran at once as if new) and the runs counted toward
-- `full_sync_every` (a periodic full sync was never due again).
CREATE TABLE connection_schedule_runs (
  connection_id   uuid        PRIMARY KEY REFERENCES connections (id) ON DELETE CASCADE,
  -- The schedule's last run (L of planning): the finish of the latest job its scheduler created
  -- (trigger schedule or manual), of either type and however it ended, cancelled included, jobs
  -- failed as abandoned left out.
  last_run_at     timestamptz,
  -- When the last full sync (any trigger) completed.
  last_full_at    timestamptz,
  -- Scheduled runs (trigger schedule) completed since then; all of them before any full sync.
  runs_since_full integer     NOT NULL DEFAULT 0 CHECK (runs_since_full >= 0),
  -- When the last job of any trigger completed (the freshness gauge).
  last_success_at timestamptz
);

-- Written by the statement that ends a job, in its transaction, whichever path ends it (finishing,
-- cancelling, the reaper, abandoned jobs): a job row that becomes (or is inserted) completed,
-- failed or cancelled updates its connection's row once.
CREATE FUNCTION record_schedule_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status NOT IN ('completed', 'failed', 'cancelled') OR NEW.finished_at IS NULL THEN
    RETURN NULL;
  END IF;
  IF TG_OP = 'UPDATE' AND OLD.status IN ('completed', 'failed', 'cancelled') THEN
    RETURN NULL;
  END IF;
  INSERT INTO connection_schedule_runs AS r (connection_id, last_run_at, last_full_at, runs_since_full, last_success_at)
  VALUES (
    NEW.connection_id,
    CASE WHEN NEW.trigger IN ('schedule', 'manual') AND NEW.abandoned_at IS NULL THEN NEW.finished_at END,
    CASE WHEN NEW.job_type = 'full' AND NEW.status = 'completed' THEN NEW.finished_at END,
    CASE WHEN NEW.job_type <> 'full' AND NEW.trigger = 'schedule' AND NEW.status = 'completed' THEN 1 ELSE 0 END,
    CASE WHEN NEW.status = 'completed' THEN NEW.finished_at END
  )
  ON CONFLICT (connection_id) DO UPDATE SET
    -- greatest() ignores nulls: a job that is not a run of that kind leaves the value as it is.
    last_run_at = greatest(r.last_run_at, excluded.last_run_at),
    last_full_at = greatest(r.last_full_at, excluded.last_full_at),
    runs_since_full = CASE
      WHEN excluded.last_full_at >= coalesce(r.last_full_at, '-infinity') THEN 0
      WHEN NEW.finished_at > coalesce(r.last_full_at, '-infinity') THEN r.runs_since_full + excluded.runs_since_full
      ELSE r.runs_since_full
    END,
    last_success_at = greatest(r.last_success_at, excluded.last_success_at);
  RETURN NULL;
END;
$$;

CREATE TRIGGER sync_jobs_record_schedule_run
  AFTER INSERT OR UPDATE OF status ON sync_jobs
  FOR EACH ROW EXECUTE FUNCTION record_schedule_run();

-- What the job rows still say, for connections that have any.
INSERT INTO connection_schedule_runs (connection_id, last_run_at, last_full_at, runs_since_full, last_success_at)
SELECT c.id,
       (SELECT max(j.finished_at) FROM sync_jobs j
         WHERE j.connection_id = c.id AND j.trigger IN ('schedule', 'manual')
           AND j.status IN ('completed', 'failed', 'cancelled') AND j.abandoned_at IS NULL),
       f.last_full_at,
       (SELECT count(*)::int FROM sync_jobs r
         WHERE r.connection_id = c.id AND r.trigger = 'schedule' AND r.status = 'completed'
           AND r.finished_at > coalesce(f.last_full_at, '-infinity'::timestamptz)),
       (SELECT max(s.finished_at) FROM sync_jobs s WHERE s.connection_id = c.id AND s.status = 'completed')
  FROM connections c
  CROSS JOIN LATERAL (SELECT max(x.finished_at) AS last_full_at FROM sync_jobs x
                       WHERE x.connection_id = c.id AND x.job_type = 'full' AND x.status = 'completed') f
 WHERE EXISTS (SELECT 1 FROM sync_jobs e WHERE e.connection_id = c.id);

-- Down Migration

DROP TRIGGER sync_jobs_record_schedule_run ON sync_jobs;
DROP FUNCTION record_schedule_run();
DROP TABLE connection_schedule_runs;
