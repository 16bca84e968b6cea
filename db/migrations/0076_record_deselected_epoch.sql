-- Up Migration

-- For a tombstone a deselection wrote (a config change's own batch, or the reconcile tick's), the
-- least count of config changes (`connections.config_epoch`) a pass must have read its config at
-- for its fetches to have begun after the tombstone committed; null for a live record and for a
-- full pass's tombstone. A page of such a pass serving the record brings it back (the config
-- selects it again); one read at a lower count cannot tell whether it was fetched before the
-- tombstone, and never undoes it. A count, not a time: a page's fetch time is its worker's clock,
-- which may differ from the one that stamped the tombstone.
-- Existing tombstones keep null: they are judged by their time, as before.
ALTER TABLE records ADD COLUMN deselected_epoch bigint;

-- Down Migration

ALTER TABLE records DROP COLUMN deselected_epoch;
