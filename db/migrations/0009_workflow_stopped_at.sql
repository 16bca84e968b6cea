-- Up Migration

-- When the reconcile tick last found the workflow of a disabled connection stopped. It is written
-- with now(), which the updated_at trigger also stamps, so the two are equal until the connection
-- changes again; the tick only looks at disabled connections changed since (updated_at later).
ALTER TABLE connections ADD COLUMN workflow_stopped_at timestamptz;

-- Down Migration

ALTER TABLE connections DROP COLUMN workflow_stopped_at;
