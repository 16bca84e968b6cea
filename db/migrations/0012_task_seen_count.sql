-- Up Migration

-- How many distinct ids the task's current full pass has put into sync_seen, counted in the same
-- transaction as each page. sync_seen is UNLOGGED: crash recovery empties it and a promoted
-- standby has none of its rows, while this logged counter survives both. Before a resumed pass
-- goes on, and before its deletion step, the task compares the two; when they differ the seen-set
-- is incomplete and the pass starts again from its first page instead of deleting records it saw.
ALTER TABLE sync_tasks
  ADD COLUMN seen_count integer NOT NULL DEFAULT 0 CONSTRAINT sync_tasks_seen_count_check CHECK (seen_count >= 0);

-- Down Migration

ALTER TABLE sync_tasks DROP COLUMN seen_count;
