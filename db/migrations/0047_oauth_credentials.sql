-- Up Migration

-- OAuth 2 credentials. A connection's credentials are of one kind: `token` (a static token, as
-- before) or `oauth2` (an access token kept fresh with a refresh token, through a tenant-level
-- OAuth app). Either way they are one sealed envelope in `connections.credentials`: for `oauth2`
-- the envelope holds the access token, the refresh token, the expiry and the scopes, so a refresh
-- replaces access and refresh token in one statement and a crash cannot keep one without the other.

-- A connection whose grant the provider refused (`invalid_grant`: revoked or expired) waits for
-- new credentials: its schedule enqueues nothing and no breaker failure is counted.
ALTER TABLE connections DROP CONSTRAINT connections_status_check;
ALTER TABLE connections ADD CONSTRAINT connections_status_check CHECK (status IN ('active', 'paused', 'disabled', 'needs_reauth'));

-- A tenant's OAuth client at one provider: where to send people (authorize_url), where to get and
-- refresh tokens (token_url), the one redirect URI it registered (compared exactly), the scopes it
-- asks for, and its client id and secret (sealed, bound to this row).
CREATE TABLE oauth_apps (
  id             uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id      text        NOT NULL,
  name           text        NOT NULL CONSTRAINT oauth_apps_name_format CHECK (name ~ '^[A-Za-z0-9_-]{1,64}$'),
  client_id      text        NOT NULL,
  client_secret  text        NOT NULL,
  authorize_url  text        NOT NULL,
  token_url      text        NOT NULL,
  redirect_uri   text        NOT NULL,
  scopes         text[]      NOT NULL DEFAULT '{}',
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT oauth_apps_tenant_name_key UNIQUE (tenant_id, name),
  CONSTRAINT oauth_apps_id_tenant_key UNIQUE (id, tenant_id)
);
CREATE TRIGGER oauth_apps_set_updated_at
  BEFORE UPDATE ON oauth_apps
  FOR EACH ROW EXECUTE FUNCTION set_updated_at();

-- The credential kind, and for `oauth2` the app whose client refreshes the grant (of the
-- connection's own tenant: the composite key). An app in use cannot be deleted.
ALTER TABLE connections
  ADD COLUMN credential_kind text NOT NULL DEFAULT 'token' CONSTRAINT connections_credential_kind_check CHECK (credential_kind IN ('token', 'oauth2')),
  ADD COLUMN oauth_app_id uuid,
  ADD CONSTRAINT connections_oauth_app_fkey FOREIGN KEY (oauth_app_id, tenant_id) REFERENCES oauth_apps (id, tenant_id),
  ADD CONSTRAINT connections_oauth_app_kind CHECK ((credential_kind = 'oauth2') = (oauth_app_id IS NOT NULL));
CREATE INDEX connections_oauth_app_idx ON connections (oauth_app_id) WHERE oauth_app_id IS NOT NULL;

-- A connect flow under way: its `state` (stored as a SHA-256 hash only), bound to the tenant, the
-- connection and the app, with the PKCE verifier (sealed, bound to this row) and a short expiry.
-- Consumed (deleted) by the one callback that presents it.
CREATE TABLE oauth_states (
  state_hash     text        PRIMARY KEY,
  tenant_id      text        NOT NULL,
  connection_id  uuid        NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  oauth_app_id   uuid        NOT NULL REFERENCES oauth_apps (id) ON DELETE CASCADE,
  code_verifier  text        NOT NULL,
  expires_at     timestamptz NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_states_connection_idx ON oauth_states (connection_id);
CREATE INDEX oauth_states_app_idx ON oauth_states (oauth_app_id);

-- Down Migration

DROP TABLE oauth_states;
ALTER TABLE connections DROP CONSTRAINT connections_oauth_app_kind, DROP CONSTRAINT connections_oauth_app_fkey,
  DROP COLUMN oauth_app_id, DROP COLUMN credential_kind;
DROP TABLE oauth_apps;
UPDATE connections SET status = 'paused' WHERE status = 'needs_reauth';
ALTER TABLE connections DROP CONSTRAINT connections_status_check;
ALTER TABLE connections ADD CONSTRAINT connections_status_check CHECK (status IN ('active', 'paused', 'disabled'));
