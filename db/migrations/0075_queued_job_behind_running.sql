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

-- One active job per connection and type again: a job queued behind a running (or retrying) one
-- of its type has no place under that rule and is cancelled first, as a cancel over the API leaves
-- one (finished now, the reason in last_error), with its open tasks (the same reason) and what
-- their passes have seen. Its `sync.cancelled` webhook event is not written (a migration seals no
-- feed cursor). Every other job is left as it is.
-- No job is inserted or claimed from here to the commit (the new index is built over what the
-- cancel left): a request still served by the new code waits, and then meets the old index.
LOCK TABLE sync_jobs IN SHARE ROW EXCLUSIVE MODE;
WITH behind AS (
  UPDATE sync_jobs q
     SET status = 'cancelled', finished_at = now(),
         last_error = 'cancelled by the down migration of 0075: queued behind a running job of its type, which the one-active-job-per-type rule it restores does not allow'
   WHERE q.status = 'queued' AND q.trigger <> 'backfill'
     AND EXISTS (SELECT 1 FROM sync_jobs r
                  WHERE r.connection_id = q.connection_id AND r.job_type = q.job_type
                    AND r.status IN ('running', 'retrying') AND r.trigger <> 'backfill')
  RETURNING q.id, q.last_error
), open_tasks AS (
  UPDATE sync_tasks t
     SET status = 'cancelled', completed_at = now(), error_message = b.last_error
    FROM behind b
   WHERE t.job_id = b.id AND t.status IN ('pending', 'processing')
  RETURNING t.id
)
DELETE FROM sync_seen s
 USING sync_tasks t, behind b
 WHERE t.job_id = b.id AND s.task_id = t.id;

DROP INDEX sync_jobs_one_running_per_type;
DROP INDEX sync_jobs_one_queued_per_type;
CREATE UNIQUE INDEX sync_jobs_one_active_per_type ON sync_jobs (connection_id, job_type)
  WHERE status IN ('queued', 'running', 'retrying') AND trigger <> 'backfill';
