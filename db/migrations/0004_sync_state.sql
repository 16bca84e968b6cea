-- Up Migration

-- Per (connection, resource type) high-water mark for incremental fetches.
CREATE TABLE sync_state (
  connection_id  uuid        NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  resource_type  text        NOT NULL,
  -- The fetch start time or the provider's own max updated_at: never a time after data could have
  -- changed unseen. NULL = no cursor yet.
  cursor         timestamptz,
  -- For providers whose high-water mark is not a time (sequence numbers, opaque tokens).
  cursor_token   text,
  -- Completion time of the last successful task for this resource.
  last_synced_at timestamptz,
  updated_at     timestamptz NOT NULL DEFAULT now(),
  -- Leading connection_id also covers the FK cascade.
  PRIMARY KEY (connection_id, resource_type)
);

CREATE TRIGGER sync_state_set_updated_at
  BEFORE UPDATE ON sync_state
  FOR EACH ROW EXECUTE FUNCTION set_updated_at();

-- Down Migration

DROP TABLE sync_state;
