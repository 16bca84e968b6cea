-- Up Migration

-- One row per finished attempt of a job.
CREATE TABLE sync_job_logs (
  id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_id          uuid        NOT NULL REFERENCES sync_jobs (id) ON DELETE CASCADE,
  -- Copied from the job for per-connection reporting; the job FK already removes the row with its
  -- connection, so no second FK.
  connection_id   uuid        NOT NULL,
  attempt         integer     NOT NULL CONSTRAINT sync_job_logs_attempt_check CHECK (attempt >= 0),
  -- NULL when the attempt failed before it started running (e.g. rejected at claim time).
  started_at      timestamptz,
  finished_at     timestamptz NOT NULL DEFAULT now(),
  processed_count bigint      NOT NULL DEFAULT 0 CONSTRAINT sync_job_logs_processed_count_check CHECK (processed_count >= 0),
  failed_count    bigint      NOT NULL DEFAULT 0 CONSTRAINT sync_job_logs_failed_count_check CHECK (failed_count >= 0),
  outcome         text        NOT NULL
                              CONSTRAINT sync_job_logs_outcome_check CHECK (outcome IN ('completed', 'failed', 'retrying', 'cancelled')),
  -- Summary without secrets or internals.
  error_summary   text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  -- A retried activity that writes the same attempt's log hits this (ON CONFLICT DO NOTHING) instead
  -- of adding a duplicate row. Also covers job_id lookups and the FK cascade.
  CONSTRAINT sync_job_logs_job_attempt_key UNIQUE (job_id, attempt)
);

-- Circuit breaker state per connection and provider.
CREATE TABLE connector_failure_stats (
  connection_id        uuid        NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  provider_slug        text        NOT NULL,
  -- Every failed attempt increments this (rate-limit retries excepted); the next success resets it.
  consecutive_failures integer     NOT NULL DEFAULT 0
                                   CONSTRAINT connector_failure_stats_consecutive_failures_check CHECK (consecutive_failures >= 0),
  last_failure_at      timestamptz,
  -- Breaker open while paused_until > now().
  paused_until         timestamptz,
  updated_at           timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (connection_id, provider_slug)
);

CREATE TRIGGER connector_failure_stats_set_updated_at
  BEFORE UPDATE ON connector_failure_stats
  FOR EACH ROW EXECUTE FUNCTION set_updated_at();

CREATE TABLE alerts (
  id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  -- e.g. 'sync_circuit_breaker'; free text so new categories need no migration.
  category      text        NOT NULL,
  severity      text        NOT NULL CONSTRAINT alerts_severity_check CHECK (severity IN ('info', 'warning', 'critical')),
  -- NULL for alerts not tied to one connection.
  connection_id uuid        REFERENCES connections (id) ON DELETE CASCADE,
  context       jsonb       NOT NULL DEFAULT '{}',
  created_at    timestamptz NOT NULL DEFAULT now(),
  resolved_at   timestamptz
);

-- An alert is raised at most once while open: raising is INSERT ... ON CONFLICT (category,
-- connection_id) WHERE resolved_at IS NULL DO NOTHING, resolving sets resolved_at, after which a new
-- alert of the same category may be raised. NULLS NOT DISTINCT (PG 15+) extends the rule to
-- alerts without a connection.
CREATE UNIQUE INDEX alerts_one_open_per_category ON alerts (category, connection_id) NULLS NOT DISTINCT
  WHERE resolved_at IS NULL;

-- Alerts of a connection (history, API context) and the FK cascade.
CREATE INDEX alerts_connection_id_idx ON alerts (connection_id);

-- Down Migration

DROP TABLE alerts;
DROP TABLE connector_failure_stats;
DROP TABLE sync_job_logs;
