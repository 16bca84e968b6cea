-- Up Migration

-- When a feed cursor expires. A purge of tombstones makes a cursor unusable only if it removed a
-- deletion the cursor's reader had not read yet: a tombstone past the cursor's position, of the
-- resource type the reader follows, purged after the cursor was issued. One watermark per
-- connection could not tell those apart (a fresh reader of a feed purged before it started was
-- refused on its second page, and a reader of one type was refused for another type's purge), so
-- each purge statement logs, per connection and resource type, the highest position it removed.
-- `id` orders purges: they hold one lock while they write, so they commit in `id` order and a
-- reader's snapshot sees exactly the purges up to some id, which its cursors carry (the epoch).
-- A row that a later row of its scope covers (a later id and a position at least as high) answers
-- no question the later one does not, and is deleted when that row is written.
CREATE TABLE feed_purges (
  id            bigserial PRIMARY KEY,
  connection_id uuid      NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  resource_type text      NOT NULL,
  purged_seq    bigint    NOT NULL
);
CREATE INDEX feed_purges_scope_idx ON feed_purges (connection_id, resource_type, id);

-- The old per-connection watermark becomes one logged purge per resource type the connection
-- still has records of: cursors issued before this migration carry no epoch and are judged
-- against it as before. `connections.feed_purged_seq` is no longer read or written; it stays
-- (migrations are additive) for processes of the previous version during a rolling upgrade.
INSERT INTO feed_purges (connection_id, resource_type, purged_seq)
SELECT c.id, t.resource_type, c.feed_purged_seq
  FROM connections c
  JOIN LATERAL (SELECT DISTINCT r.resource_type FROM records r WHERE r.connection_id = c.id) t ON true
 WHERE c.feed_purged_seq > 0;

-- Down Migration

UPDATE connections c SET feed_purged_seq = greatest(c.feed_purged_seq, p.purged_seq)
  FROM (SELECT connection_id, max(purged_seq) AS purged_seq FROM feed_purges GROUP BY connection_id) p
 WHERE c.id = p.connection_id;
DROP TABLE feed_purges;
