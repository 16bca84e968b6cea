-- Up Migration

-- Rate budgets are per tenant and credential, under a keyed fingerprint (an HMAC keyed from the
-- credentials keyring over the tenant, the provider and the credential): one tenant's connection
-- can no longer spend or poison another tenant's budget by holding the same token, and a database
-- dump no longer allows guessing weak credentials offline from unsalted hashes. The old rows are
-- keyed by the old unsalted fingerprints: budgets are soft state (the provider states its count
-- again with the next answer), so they are simply dropped.
DELETE FROM rate_budgets;
ALTER TABLE rate_budgets ADD COLUMN tenant_id text NOT NULL;
-- The reset a provider stated when it lay beyond RATE_BUDGET_MAX_RESET_SECONDS (`reset_at` then
-- holds the cap); null when the stated reset was taken as it was.
ALTER TABLE rate_budgets ADD COLUMN reset_capped_from timestamptz;

-- Which connections use which budget, recorded when a sync first asks it: a purge deletes the
-- budgets its connection used that no other connection uses (the rows here go with the
-- connection's by cascade).
CREATE TABLE rate_budget_connections (
  connection_id uuid NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  fingerprint   text NOT NULL,
  PRIMARY KEY (connection_id, fingerprint)
);
CREATE INDEX rate_budget_connections_fingerprint ON rate_budget_connections (fingerprint);

-- Down Migration

DROP TABLE rate_budget_connections;
ALTER TABLE rate_budgets DROP COLUMN reset_capped_from;
ALTER TABLE rate_budgets DROP COLUMN tenant_id;
