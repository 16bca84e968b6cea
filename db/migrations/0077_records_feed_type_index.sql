-- Up Migration

-- A connection's changes of one resource type in feed order: a reader of one type reads its next
-- change after its cursor from here. By `records_feed_idx` (connection_id, change_seq) alone it
-- walked every change of the connection's other types after its cursor to find one of its type,
-- and a reader of a quiet type polls at a cursor that does not move: every poll walked them again.
-- `records_feed_idx` stays: a reader of every type reads the connection's changes in feed order
-- from it. A change already writes a new entry in that index (a new `change_seq`), so this costs
-- one more entry per change and turns no update that changes nothing indexed into a non-HOT one.
-- Built in the migrations' transaction (not concurrently): writes to `records` wait for the build.
CREATE INDEX records_feed_type_idx ON records (connection_id, resource_type, change_seq);

-- Down Migration

DROP INDEX records_feed_type_idx;
