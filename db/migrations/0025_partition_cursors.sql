-- Up Migration

-- One cursor per (connection, resource type, partition): what a connector pages separately (a
-- GitHub repository) moves on its own, so a change in one partition read while another was being
-- read is never covered by the other's progress. The old single cursor becomes partition '' (the
-- only partition of single-partition connectors, which keep their cursor). Partitioned connectors
-- (GitHub) find no cursor for their partitions: each is read once more from nothing.
ALTER TABLE sync_state ADD COLUMN partition text NOT NULL DEFAULT '';
ALTER TABLE sync_state DROP CONSTRAINT sync_state_pkey;
ALTER TABLE sync_state ADD PRIMARY KEY (connection_id, resource_type, partition);

-- Per partition, the newest provider change time a task's pass has seen (`high`) and the time its
-- cursor may not pass (`hold`), as JSON objects of ISO times, kept with the paging progress so a
-- resumed task moves each cursor no further than what it read.
ALTER TABLE sync_tasks ADD COLUMN partition_progress jsonb NOT NULL DEFAULT '{"high": {}, "hold": {}}';

-- A validator now skips only the page it validates, so each stored ETag carries what follows its
-- page (the connector's note; null: the listing's last page). The old rows meant "the whole
-- listing is unchanged", which a 304 no longer may: they go (one unconditional pass re-stores them).
DELETE FROM provider_etags;
ALTER TABLE provider_etags ADD COLUMN next text;

-- Down Migration

ALTER TABLE provider_etags DROP COLUMN next;
ALTER TABLE sync_tasks DROP COLUMN partition_progress;
DELETE FROM sync_state WHERE partition <> '';
ALTER TABLE sync_state DROP CONSTRAINT sync_state_pkey;
ALTER TABLE sync_state ADD PRIMARY KEY (connection_id, resource_type);
ALTER TABLE sync_state DROP COLUMN partition;
