-- Up Migration

-- Per-tenant limits the admin has overridden: one row per tenant, each column null where the
-- tenant has the default (TENANT_MAX_* in configuration). 0 allows none.
CREATE TABLE tenant_limits (
  tenant_id                 text        PRIMARY KEY,
  max_connections           integer     CHECK (max_connections >= 0),
  max_webhooks              integer     CHECK (max_webhooks >= 0),
  max_immediate_syncs       integer     CHECK (max_immediate_syncs >= 0),
  max_running_jobs          integer     CHECK (max_running_jobs >= 0),
  max_redeliveries_per_hour integer     CHECK (max_redeliveries_per_hour >= 0),
  updated_at                timestamptz NOT NULL DEFAULT now()
);

-- The immediate syncs running now, one row each, counted against a tenant's limit: inserted by
-- the API before it starts one, deleted when it answers. A row whose API process died is no
-- longer counted after `expires_at`, the immediate sync's own execution timeout.
CREATE TABLE immediate_sync_leases (
  id            uuid        PRIMARY KEY,
  tenant_id     text        NOT NULL,
  connection_id uuid        NOT NULL,
  expires_at    timestamptz NOT NULL
);
CREATE INDEX immediate_sync_leases_tenant_idx ON immediate_sync_leases (tenant_id, expires_at);

-- Webhook redeliveries asked for, counted per tenant over the last hour; older rows are deleted
-- by the next redelivery of the tenant.
CREATE TABLE webhook_redeliveries (
  id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id   text        NOT NULL,
  delivery_id uuid        NOT NULL,
  at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_redeliveries_tenant_idx ON webhook_redeliveries (tenant_id, at);

-- A tenant's running jobs, counted by every claim.
CREATE INDEX sync_jobs_running_tenant_idx ON sync_jobs (tenant_id) WHERE status = 'running';

-- Down Migration

DROP INDEX sync_jobs_running_tenant_idx;
DROP TABLE webhook_redeliveries;
DROP TABLE immediate_sync_leases;
DROP TABLE tenant_limits;
