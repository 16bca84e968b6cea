-- Up Migration

-- A change feed over `records`. Every write that changes a record (insert, changed update, and a
-- full pass's deletion, which now leaves a tombstone instead of removing the row) takes the next
-- value of one sequence, so a consumer reads a connection's changes in `change_seq` order from a
-- cursor. Writers of one connection hold a per-connection transaction lock while they write, so
-- they commit in sequence order and a reader never sees a later value before an earlier one.
--
-- A tombstone keeps the record's last data: a consumer that derived something from a record (a
-- search entry, a row keyed by another field) needs it to undo that. Tombstones are purged after
-- TOMBSTONE_RETENTION_DAYS; `connections.feed_purged_seq` remembers the highest sequence value a
-- purge removed, so a cursor older than it is told to start again rather than silently missing a
-- deletion.
CREATE SEQUENCE records_change_seq AS bigint;
ALTER TABLE records
  ADD COLUMN change_seq bigint NOT NULL DEFAULT nextval('records_change_seq'),
  ADD COLUMN change     text   NOT NULL DEFAULT 'insert'
    CONSTRAINT records_change_check CHECK (change IN ('insert', 'update', 'delete')),
  ADD COLUMN deleted_at timestamptz,
  ADD CONSTRAINT records_tombstone_check CHECK ((change = 'delete') = (deleted_at IS NOT NULL));
ALTER SEQUENCE records_change_seq OWNED BY records.change_seq;
CREATE INDEX records_feed_idx ON records (connection_id, change_seq);
CREATE INDEX records_tombstones_idx ON records (deleted_at) WHERE deleted_at IS NOT NULL;

ALTER TABLE connections ADD COLUMN feed_purged_seq bigint NOT NULL DEFAULT 0;

-- What each task's writes did, by kind: `deleted_count` (existing) counts tombstones.
ALTER TABLE sync_tasks
  ADD COLUMN added_count     integer NOT NULL DEFAULT 0 CONSTRAINT sync_tasks_added_count_check CHECK (added_count >= 0),
  ADD COLUMN updated_count   integer NOT NULL DEFAULT 0 CONSTRAINT sync_tasks_updated_count_check CHECK (updated_count >= 0),
  ADD COLUMN unchanged_count integer NOT NULL DEFAULT 0 CONSTRAINT sync_tasks_unchanged_count_check CHECK (unchanged_count >= 0);

-- Down Migration

ALTER TABLE sync_tasks DROP COLUMN added_count, DROP COLUMN updated_count, DROP COLUMN unchanged_count;
ALTER TABLE connections DROP COLUMN feed_purged_seq;
DELETE FROM records WHERE deleted_at IS NOT NULL;
DROP INDEX records_tombstones_idx;
DROP INDEX records_feed_idx;
ALTER TABLE records DROP CONSTRAINT records_tombstone_check, DROP COLUMN deleted_at, DROP COLUMN change, DROP COLUMN change_seq;
