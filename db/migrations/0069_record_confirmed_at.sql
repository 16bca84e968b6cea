-- Up Migration

-- When (the database's clock) a page stored while a full pass of the record's resource type was
-- running, other than that pass's own, last wrote the record or served it unchanged (null: never).
-- That pass's deletion step does not judge a record confirmed at or after the pass's start: the
-- listing may have missed the record (gone for a moment, created behind its position, or a listing
-- that is not stable), and a fetch during the pass that found it alive is news the listing cannot
-- outweigh. The database's clock, as the task's start: a worker's clock (fetched_at, synced_at) may
-- differ from it.
ALTER TABLE records ADD COLUMN confirmed_at timestamptz;

-- Down Migration

ALTER TABLE records DROP COLUMN confirmed_at;
