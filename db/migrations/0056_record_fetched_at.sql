-- Up Migration

-- When the provider request that served a record's stored version began (null for versions
-- written before this column). Two jobs of a connection can overlap, and their pages take turns
-- under the connection's feed lock, so a page fetched earlier can be written later. The provider's
-- change time says which version is newer when the two differ; when they are equal (a provider
-- that keeps whole seconds, a record changed twice within one) or either is missing, the version
-- fetched later is the newer one, and a page fetched before the stored version never replaces it.
ALTER TABLE records ADD COLUMN fetched_at timestamptz;

-- Down Migration

ALTER TABLE records DROP COLUMN fetched_at;
