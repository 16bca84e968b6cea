-- Up Migration

-- One task per resource type of a job.
CREATE TABLE sync_tasks (
  id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  job_id        uuid        NOT NULL REFERENCES sync_jobs (id) ON DELETE CASCADE,
  resource_type text        NOT NULL,
  status        text        NOT NULL DEFAULT 'pending'
                            CONSTRAINT sync_tasks_status_check
                            CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'cancelled')),
  entity_count  integer     NOT NULL DEFAULT 0 CONSTRAINT sync_tasks_entity_count_check CHECK (entity_count >= 0),
  deleted_count integer     NOT NULL DEFAULT 0 CONSTRAINT sync_tasks_deleted_count_check CHECK (deleted_count >= 0),
  error_message text,
  started_at    timestamptz,
  completed_at  timestamptz,
  heartbeat_at  timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  -- Makes task creation idempotent (ON CONFLICT DO NOTHING on a retried activity) and covers
  -- job_id lookups and the FK cascade.
  CONSTRAINT sync_tasks_job_resource_key UNIQUE (job_id, resource_type)
);

-- Stale-task reaper: status = 'processing' AND heartbeat_at < now() - interval '5 minutes'.
CREATE INDEX sync_tasks_status_heartbeat_idx ON sync_tasks (status, heartbeat_at);

CREATE TRIGGER sync_tasks_set_updated_at
  BEFORE UPDATE ON sync_tasks
  FOR EACH ROW EXECUTE FUNCTION set_updated_at();

-- Down Migration

DROP TABLE sync_tasks;
