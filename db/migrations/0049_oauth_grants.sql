-- Up Migration

-- An OAuth 2 grant as its own row, so connections of one tenant can share it: the sealed envelope
-- (access token, refresh token, expiry, scopes) and the renewal lease live on the grant, and a
-- refresh (one per grant across every worker) is used by every connection of the grant.
-- The envelope stays bound to the grant's id as additional authenticated data in the slot of a
-- connection's credentials (`connections` / id): a grant moved here from a connection keeps that
-- connection's id as its own id, so its envelope moves unchanged (no re-seal, no key needed).
CREATE TABLE oauth_grants (
  id                      uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id               text        NOT NULL,
  oauth_app_id            uuid        NOT NULL,
  credentials             jsonb       NOT NULL,
  credential_lease_token  uuid,
  credential_lease_until  timestamptz,
  created_at              timestamptz NOT NULL DEFAULT now(),
  updated_at              timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT oauth_grants_oauth_app_fkey FOREIGN KEY (oauth_app_id, tenant_id) REFERENCES oauth_apps (id, tenant_id),
  CONSTRAINT oauth_grants_id_app_tenant_key UNIQUE (id, oauth_app_id, tenant_id),
  CONSTRAINT oauth_grants_credential_lease_pair CHECK ((credential_lease_token IS NULL) = (credential_lease_until IS NULL))
);
CREATE INDEX oauth_grants_app_idx ON oauth_grants (oauth_app_id);
CREATE TRIGGER oauth_grants_set_updated_at
  BEFORE UPDATE ON oauth_grants
  FOR EACH ROW EXECUTE FUNCTION set_updated_at();

-- An `oauth2` connection names its grant, of its own tenant and its own OAuth app (the composite
-- key), and holds no credentials itself.
ALTER TABLE connections
  ADD COLUMN oauth_grant_id uuid,
  ADD CONSTRAINT connections_oauth_grant_fkey FOREIGN KEY (oauth_grant_id, oauth_app_id, tenant_id) REFERENCES oauth_grants (id, oauth_app_id, tenant_id);
CREATE INDEX connections_oauth_grant_idx ON connections (oauth_grant_id) WHERE oauth_grant_id IS NOT NULL;

INSERT INTO oauth_grants (id, tenant_id, oauth_app_id, credentials, credential_lease_token, credential_lease_until)
  SELECT id, tenant_id, oauth_app_id, credentials, credential_lease_token, credential_lease_until
    FROM connections WHERE credential_kind = 'oauth2' AND credentials IS NOT NULL AND credentials <> 'null'::jsonb;
UPDATE connections SET oauth_grant_id = id, credentials = NULL, credential_lease_token = NULL, credential_lease_until = NULL
  WHERE credential_kind = 'oauth2' AND EXISTS (SELECT 1 FROM oauth_grants g WHERE g.id = connections.id);
-- An oauth2 connection without credentials (none can be made; kept for safety) becomes a connection without any.
UPDATE connections SET credential_kind = 'token', oauth_app_id = NULL WHERE credential_kind = 'oauth2' AND oauth_grant_id IS NULL;
ALTER TABLE connections ADD CONSTRAINT connections_oauth_grant_kind CHECK ((credential_kind = 'oauth2') = (oauth_grant_id IS NOT NULL));

-- A grant no connection names any more is deleted with its secrets.
CREATE FUNCTION delete_unused_oauth_grant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM oauth_grants g WHERE g.id = OLD.oauth_grant_id
    AND NOT EXISTS (SELECT 1 FROM connections c WHERE c.oauth_grant_id = OLD.oauth_grant_id);
  RETURN NULL;
END $$;
CREATE TRIGGER connections_delete_unused_oauth_grant
  AFTER UPDATE OF oauth_grant_id OR DELETE ON connections
  FOR EACH ROW WHEN (OLD.oauth_grant_id IS NOT NULL) EXECUTE FUNCTION delete_unused_oauth_grant();

-- Down Migration

-- Each grant goes back into the connection whose id it has (its envelope is bound to that id);
-- another connection that shared it cannot open that envelope and is left needing reauthorization.
DROP TRIGGER connections_delete_unused_oauth_grant ON connections;
DROP FUNCTION delete_unused_oauth_grant();
ALTER TABLE connections DROP CONSTRAINT connections_oauth_grant_kind;
UPDATE connections c SET credentials = g.credentials FROM oauth_grants g WHERE g.id = c.id AND c.oauth_grant_id = g.id;
UPDATE connections SET status = 'needs_reauth'
  WHERE oauth_grant_id IS NOT NULL AND oauth_grant_id <> id AND status IN ('active', 'paused');
ALTER TABLE connections DROP CONSTRAINT connections_oauth_grant_fkey, DROP COLUMN oauth_grant_id;
DROP TABLE oauth_grants;
