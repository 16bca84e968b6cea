-- Up Migration

-- The synced data, upserted one statement per page.
CREATE TABLE records (
  connection_id     uuid        NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  resource_type     text        NOT NULL,
  external_id       text        NOT NULL,
  data              jsonb       NOT NULL,
  source_updated_at timestamptz,
  -- The job whose pass last saw this record. Deliberately no FK: retention cleanup of old jobs must
  -- never cascade into (or be blocked by) the synced data. NULL for rows written without a job.
  last_seen_job_id  uuid,
  synced_at         timestamptz NOT NULL DEFAULT now(),
  -- Leading connection_id also covers the FK cascade.
  PRIMARY KEY (connection_id, resource_type, external_id)
);

-- Down Migration

DROP TABLE records;
