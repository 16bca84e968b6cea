-- Up Migration

-- How many of its tasks a job runs at once, as its preparation decided (its connection's
-- `max_parallel_tasks`, no more than it has tasks; 1 before it is prepared). Each of those tasks
-- holds a worker's activity slot, so a running job takes that many places of its tenant's
-- running-jobs limit: counted by jobs alone, a tenant's jobs of eight parallel tasks held eight
-- times the slots the limit allowed.
ALTER TABLE sync_jobs ADD COLUMN parallel_tasks smallint NOT NULL DEFAULT 1
  CONSTRAINT sync_jobs_parallel_tasks_check CHECK (parallel_tasks >= 1);

-- Down Migration

ALTER TABLE sync_jobs DROP COLUMN parallel_tasks;
