-- Up Migration

-- External ids a full-sync task has seen so far in its pass. At the end of a complete, successful
-- pass, records of that connection and resource type missing here are deleted. Keeping the set
-- here (not by stamping every record) means unchanged records are never rewritten, and a task
-- resumed from its last heartbeated page still knows what its earlier pages saw. Rows are deleted
-- when the task finishes (or with the task by cascade); UNLOGGED because a crash only costs a
-- re-run of the pass.
CREATE UNLOGGED TABLE sync_seen (
  task_id     uuid NOT NULL REFERENCES sync_tasks (id) ON DELETE CASCADE,
  external_id text NOT NULL,
  PRIMARY KEY (task_id, external_id)
);

-- Paging progress of a task, written in the same transaction as each page's records, so a retried
-- task activity resumes after the last page it stored (exactly; a heartbeat can lag one page).
ALTER TABLE sync_tasks
  ADD COLUMN page_token       text,
  ADD COLUMN pages_done       integer NOT NULL DEFAULT 0,
  -- Largest provider updated_at seen in this pass: becomes sync_state.cursor on success.
  ADD COLUMN high_water       timestamptz,
  ADD COLUMN written_count    integer NOT NULL DEFAULT 0;

-- Down Migration

ALTER TABLE sync_tasks
  DROP COLUMN page_token,
  DROP COLUMN pages_done,
  DROP COLUMN high_water,
  DROP COLUMN written_count;
DROP TABLE sync_seen;
