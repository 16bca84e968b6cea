-- Up Migration

-- Conventions for every Synctide table:
-- * Enum-like columns are `text` + CHECK, not Postgres enum types: no casts needed when comparing
--   with parameters from the app (a seed review found bugs from uncast enum comparisons), and adding
--   a value is a plain constraint swap inside a transaction (ALTER TYPE ... ADD VALUE is not).
-- * uuid keys default to gen_random_uuid() (core since PG 13); the app may supply its own ids.
-- * Tables with updated_at keep it current through the set_updated_at() trigger below, so no
--   UPDATE statement can forget it.

CREATE FUNCTION set_updated_at() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.updated_at := now();
  RETURN NEW;
END;
$$;

-- One tenant's link to one provider.
CREATE TABLE connections (
  id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id     text        NOT NULL,
  provider_slug text        NOT NULL,
  app_key       text        NOT NULL CONSTRAINT connections_app_key_format CHECK (app_key ~ '^[A-Za-z0-9_-]{1,64}$'),
  status        text        NOT NULL DEFAULT 'active'
                            CONSTRAINT connections_status_check CHECK (status IN ('active', 'paused', 'disabled')),
  -- Provider settings and resource types.
  config        jsonb       NOT NULL DEFAULT '{}' CONSTRAINT connections_config_is_object CHECK (jsonb_typeof(config) = 'object'),
  -- Secrets: never logged, never returned by the API. Nullable (e.g. the demo connector needs none).
  credentials   jsonb,
  -- `metadata.sync` holds the scheduler contract (interval_seconds | cron, next_run_at,
  -- last_jitter_seconds, first_activated_at). Its values are validated by the app, which ignores
  -- bad ones with a warning, so only the top-level shape is constrained here.
  metadata      jsonb       NOT NULL DEFAULT '{}' CONSTRAINT connections_metadata_is_object CHECK (jsonb_typeof(metadata) = 'object'),
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  -- Also serves every lookup by tenant_id (leading column), so no separate tenant index.
  CONSTRAINT connections_tenant_app_key_key UNIQUE (tenant_id, app_key),
  -- Target of sync_jobs' composite FK, which keeps sync_jobs.tenant_id equal to its connection's.
  CONSTRAINT connections_id_tenant_key UNIQUE (id, tenant_id)
);

-- Reconcile tick: `WHERE status = 'active' AND id > $last ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED`.
CREATE INDEX connections_status_id_idx ON connections (status, id);

CREATE TRIGGER connections_set_updated_at
  BEFORE UPDATE ON connections
  FOR EACH ROW EXECUTE FUNCTION set_updated_at();

-- Down Migration

DROP TABLE connections;
DROP FUNCTION set_updated_at();
