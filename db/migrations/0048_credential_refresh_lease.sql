-- Up Migration

-- A credential's renewal lease. A worker that renews a credential (an OAuth 2 refresh, a GitHub
-- App installation token, a client credentials token) first claims the lease in a short
-- transaction (its own random token, valid until `credential_lease_until`), then asks the provider
-- with no database connection held, then stores the answer with a compare-and-set that also ends
-- the lease. Other workers that find a live lease wait for the stored result; a lease past its
-- expiry (its worker died) may be claimed by another.
ALTER TABLE connections
  ADD COLUMN credential_lease_token uuid,
  ADD COLUMN credential_lease_until timestamptz,
  ADD CONSTRAINT connections_credential_lease_pair CHECK ((credential_lease_token IS NULL) = (credential_lease_until IS NULL));

-- Down Migration

ALTER TABLE connections DROP CONSTRAINT connections_credential_lease_pair,
  DROP COLUMN credential_lease_until, DROP COLUMN credential_lease_token;
