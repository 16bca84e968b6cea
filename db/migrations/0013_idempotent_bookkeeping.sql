-- Up Migration

-- Bookkeeping run as local activities can run twice when the workflow task that ran it is lost
-- (a worker dies before the task completes). Each step must then change nothing the second time:
-- a connection workflow run's start-up cleanup fails only the scheduler jobs of *other* runs (a
-- job remembers the run that enqueued it), and a failed attempt counts toward the breaker once
-- (the stats remember the last attempt they counted).
ALTER TABLE sync_jobs ADD COLUMN scheduler_run_id text;
ALTER TABLE connector_failure_stats ADD COLUMN last_failure_key text;

-- Down Migration

ALTER TABLE connector_failure_stats DROP COLUMN last_failure_key;
ALTER TABLE sync_jobs DROP COLUMN scheduler_run_id;
