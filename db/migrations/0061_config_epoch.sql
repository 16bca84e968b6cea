-- Up Migration

-- Counts a connection's config changes. A pass notes the count its config was read at (on its
-- task, kept when the task resumes) and each page's store compares it under the config's share
-- lock: a change since (one that stopped selecting a partition, even when a later one selected it
-- again) sends the page through the store that reads the current config, which keeps only the
-- records it selects and stores no cursors or ETags.
ALTER TABLE connections ADD COLUMN config_epoch bigint NOT NULL DEFAULT 0;
ALTER TABLE sync_tasks ADD COLUMN config_epoch bigint;

-- Down Migration

ALTER TABLE sync_tasks DROP COLUMN config_epoch;
ALTER TABLE connections DROP COLUMN config_epoch;
