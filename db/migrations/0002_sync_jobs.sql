-- Up Migration

CREATE TABLE sync_jobs (
  -- The app usually supplies the id (generated in the workflow, so a retried enqueue is idempotent).
  id                     uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  connection_id          uuid        NOT NULL,
  -- Denormalised copy of connections.tenant_id: a UNIQUE constraint cannot span tables, and the
  -- idempotency key must be unique per tenant. The composite FK below guarantees it never drifts
  -- from the connection's tenant (and follows it on update).
  tenant_id              text        NOT NULL,
  job_type               text        NOT NULL
                                     CONSTRAINT sync_jobs_job_type_check CHECK (job_type IN ('incremental', 'full')),
  trigger                text        NOT NULL
                                     CONSTRAINT sync_jobs_trigger_check CHECK (trigger IN ('schedule', 'manual', 'api', 'backfill')),
  status                 text        NOT NULL DEFAULT 'queued'
                                     CONSTRAINT sync_jobs_status_check
                                     CHECK (status IN ('queued', 'running', 'retrying', 'completed', 'failed', 'cancelled')),
  priority               integer     NOT NULL DEFAULT 0,
  scheduled_at           timestamptz NOT NULL DEFAULT now(),
  started_at             timestamptz,
  finished_at            timestamptz,
  window_start           timestamptz,
  window_end             timestamptz,
  payload                jsonb       NOT NULL DEFAULT '{}',
  retry_count            integer     NOT NULL DEFAULT 0 CONSTRAINT sync_jobs_retry_count_check CHECK (retry_count >= 0),
  max_retries            integer     NOT NULL DEFAULT 5 CONSTRAINT sync_jobs_max_retries_check CHECK (max_retries >= 0),
  -- Rate-limit retries are capped separately and do not count toward retry_count or the breaker.
  rate_limit_retry_count integer     NOT NULL DEFAULT 0
                                     CONSTRAINT sync_jobs_rate_limit_retry_count_check CHECK (rate_limit_retry_count >= 0),
  retry_after            timestamptz,
  last_error             text,
  -- Set when a job was left active by a connection workflow that ended (terminated, crashed) and
  -- was then failed by the next run's cleanup. Schedule planning ignores such jobs when it looks
  -- for the last finished run, so the restarted workflow catches up at once.
  abandoned_at           timestamptz,
  idempotency_key        text,
  workflow_id            text,
  total_tasks            integer     NOT NULL DEFAULT 0 CONSTRAINT sync_jobs_total_tasks_check CHECK (total_tasks >= 0),
  completed_tasks        integer     NOT NULL DEFAULT 0 CONSTRAINT sync_jobs_completed_tasks_check CHECK (completed_tasks >= 0),
  failed_tasks           integer     NOT NULL DEFAULT 0 CONSTRAINT sync_jobs_failed_tasks_check CHECK (failed_tasks >= 0),
  processed_entities     bigint      NOT NULL DEFAULT 0 CONSTRAINT sync_jobs_processed_entities_check CHECK (processed_entities >= 0),
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now(),
  -- Passes when either bound is NULL (open window / no window).
  CONSTRAINT sync_jobs_window_check CHECK (window_end >= window_start),
  CONSTRAINT sync_jobs_connection_fk FOREIGN KEY (connection_id, tenant_id)
    REFERENCES connections (id, tenant_id) ON DELETE CASCADE ON UPDATE CASCADE,
  -- Idempotency-Key of POST /jobs/schedule: a repeat finds the existing job instead of inserting.
  -- NULL keys never conflict, so jobs without a key are unconstrained.
  CONSTRAINT sync_jobs_tenant_idempotency_key_key UNIQUE (tenant_id, idempotency_key)
);

-- At most one active (queued/running/retrying) job per connection and job_type, whatever its
-- trigger: this is what makes enqueue idempotent under races (INSERT ... ON CONFLICT
-- (connection_id, job_type) WHERE status IN ('queued','running','retrying') DO NOTHING, then return
-- the existing job). Finished jobs drop out of the index, so history is unconstrained.
-- A backfill (trigger 'backfill', POST /jobs/schedule with a window) keeps job_type incremental|full
-- and is subject to the same rule: while a job of its type is active for the connection, the
-- insert conflicts and the caller gets the active job (or retries later). That is intended: two
-- syncs of the same kind must never run at once against one connection's cursors and records.
-- An incremental and a full job may be active side by side.
CREATE UNIQUE INDEX sync_jobs_one_active_per_type ON sync_jobs (connection_id, job_type)
  WHERE status IN ('queued', 'running', 'retrying');

-- Claiming due jobs and queue-depth counts by status.
CREATE INDEX sync_jobs_status_scheduled_at_idx ON sync_jobs (status, scheduled_at);

-- "Latest finished incremental job" for schedule planning
-- (WHERE connection_id = $1 AND job_type = 'incremental' AND status IN ('completed','failed')
--  ORDER BY finished_at DESC LIMIT 1). Also covers connection_id for the FK cascade and per-connection
-- listings.
CREATE INDEX sync_jobs_connection_type_finished_idx ON sync_jobs (connection_id, job_type, finished_at DESC);

-- Retention cleanup of old jobs.
CREATE INDEX sync_jobs_created_at_idx ON sync_jobs (created_at);

CREATE TRIGGER sync_jobs_set_updated_at
  BEFORE UPDATE ON sync_jobs
  FOR EACH ROW EXECUTE FUNCTION set_updated_at();

-- Down Migration

DROP TABLE sync_jobs;
