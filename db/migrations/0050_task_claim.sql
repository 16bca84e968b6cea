-- Up Migration

-- Which run of a task holds it. Every claim (`pending → processing`, or a retry taking over a task
-- still `processing`) writes a new random token; every write of the run's progress (a page, the
-- deletion step, the completion) first locks the task row and goes ahead only while the token is
-- still its own. An attempt Temporal timed out while it was still running (a slow worker, not a
-- dead one) therefore stores nothing after its retry claimed the task, instead of counting its
-- pages a second time. Null for a task never claimed (or claimed before this column existed).
ALTER TABLE sync_tasks ADD COLUMN claim uuid;

-- Down Migration

ALTER TABLE sync_tasks DROP COLUMN claim;
