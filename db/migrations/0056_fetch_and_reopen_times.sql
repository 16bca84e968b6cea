-- Up Migration

-- When the provider request that served a record's stored version began (null for versions
-- written before this column). Two jobs of a connection can overlap, and their pages take turns
-- under the connection's feed lock, so a page fetched earlier can be written later. The provider's
-- change time says which version is newer when the two differ; when they are equal (a provider
-- that keeps whole seconds, a record changed twice within one) or either is missing, the version
-- fetched later is the newer one, and a page fetched before the stored version never replaces it.
ALTER TABLE records ADD COLUMN fetched_at timestamptz;

-- When a delivery was last redelivered (null: never). The run of the round before may still be
-- ending, and its step that marks the delivery failed may run again (a retry after its answer was
-- lost): a failure decided before the redelivery ends no later round.
ALTER TABLE webhook_deliveries ADD COLUMN reopened_at timestamptz;

-- Down Migration

ALTER TABLE webhook_deliveries DROP COLUMN reopened_at;
ALTER TABLE records DROP COLUMN fetched_at;
