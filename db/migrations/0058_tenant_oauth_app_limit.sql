-- Up Migration

-- The admin's override of how many OAuth apps a tenant may register (null: the default,
-- TENANT_MAX_OAUTH_APPS). Every other thing a tenant creates had a limit; its OAuth apps had none.
ALTER TABLE tenant_limits ADD COLUMN max_oauth_apps integer CHECK (max_oauth_apps >= 0);

-- Down Migration

ALTER TABLE tenant_limits DROP COLUMN max_oauth_apps;
