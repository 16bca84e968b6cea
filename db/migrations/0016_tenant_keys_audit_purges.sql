-- Up Migration

-- API keys of tenants. The admin key (ADMIN_API_KEY) sees every tenant; a tenant key sees only its
-- own tenant's connections, jobs, records, webhooks and purges. The secret is shown once, when the
-- key is created; only its SHA-256 is kept (the secret is 32 random bytes, so a fast hash is
-- enough: there is nothing to guess). `prefix` is the public part of the key, both for lookup and
-- for people to tell keys apart. A revoked key stays listed (with revoked_at) for the audit trail.
CREATE TABLE api_keys (
  id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id    text        NOT NULL,
  name         text,
  prefix       text        NOT NULL CONSTRAINT api_keys_prefix_key UNIQUE,
  secret_hash  bytea       NOT NULL,
  scopes       text[]      NOT NULL DEFAULT '{read,write}'
                           CONSTRAINT api_keys_scopes_check CHECK (scopes <@ '{read,write}' AND cardinality(scopes) > 0),
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at   timestamptz
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id, created_at, id);

-- Every mutating API call: who (the admin, or a tenant key's id), what (method and path), its
-- target, when and the answer's status. Read by the admin with GET /audit, newest first.
CREATE TABLE audit_log (
  id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at         timestamptz NOT NULL DEFAULT now(),
  actor      text        NOT NULL,
  api_key_id uuid,
  tenant_id  text,
  method     text        NOT NULL,
  path       text        NOT NULL,
  target_id  text,
  status     integer     NOT NULL
);
CREATE INDEX audit_log_tenant_idx ON audit_log (tenant_id, id DESC);

-- Deleting a connection: the purge that removes it and everything of it, in batches, run by a
-- `connection-purge:<id>` workflow. The row outlives the connection so its status stays readable;
-- it keeps only ids and counts, nothing of the connection's data.
CREATE TABLE connection_purges (
  id             uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  connection_id  uuid        NOT NULL,
  tenant_id      text        NOT NULL,
  status         text        NOT NULL DEFAULT 'pending'
                             CONSTRAINT connection_purges_status_check CHECK (status IN ('pending', 'running', 'completed')),
  deleted_rows   bigint      NOT NULL DEFAULT 0,
  created_at     timestamptz NOT NULL DEFAULT now(),
  finished_at    timestamptz
);
-- One open purge per connection: a repeated DELETE finds it instead of starting another.
CREATE UNIQUE INDEX connection_purges_one_open ON connection_purges (connection_id) WHERE status <> 'completed';

-- Down Migration

DROP TABLE connection_purges;
DROP TABLE audit_log;
DROP TABLE api_keys;
