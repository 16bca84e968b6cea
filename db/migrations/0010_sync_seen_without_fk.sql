-- Up Migration

-- A full pass writes one sync_seen row per record, and the foreign key to sync_tasks made each a
-- referential lookup: about 1.1 s of a 100,000-record job (BENCHMARKS.md, ingest). The rows are
-- deleted explicitly instead: when the task completes, fails, is reaped or its job is cancelled,
-- and, for jobs retention deletes, in the same statement as the job.
ALTER TABLE sync_seen DROP CONSTRAINT sync_seen_task_id_fkey;

-- Down Migration

DELETE FROM sync_seen s WHERE NOT EXISTS (SELECT 1 FROM sync_tasks t WHERE t.id = s.task_id);
ALTER TABLE sync_seen
  ADD CONSTRAINT sync_seen_task_id_fkey FOREIGN KEY (task_id) REFERENCES sync_tasks (id) ON DELETE CASCADE;
