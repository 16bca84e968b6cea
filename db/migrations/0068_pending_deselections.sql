-- Up Migration

-- What a config change stopped selecting and whose records are not all tombstoned yet: one row per
-- deselected unit, a whole resource type (`id_prefix` empty) or, of a type still listed, the
-- records whose ids start with `id_prefix` (a GitHub repository no longer named). The change
-- tombstones at most one batch of them in its own request; the reconcile tick tombstones the rest
-- in batches, each its own transaction under the connection's change-feed lock, moving `after_id`
-- (the last id it visited, in the records key's order; empty: from the start) and deleting the row
-- when none is left. A change that selects the unit again deletes its row. Goes with its connection.
CREATE TABLE pending_deselections (
  connection_id uuid        NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  resource_type text        NOT NULL,
  id_prefix     text        NOT NULL DEFAULT '',
  after_id      text        NOT NULL DEFAULT '',
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (connection_id, resource_type, id_prefix)
);

-- Down Migration

DROP TABLE pending_deselections;
