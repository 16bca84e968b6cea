-- Up Migration

-- A webhook's signing secret rotated with an overlap (`POST /webhooks/{id}/rotate-secret`): the
-- secret it replaced, kept until `previous_secret_expires_at` (the database's clock), and every
-- delivery attempt made before then is signed with both. Sealed as `secret` is and bound to the
-- same row (its envelope moves here from `secret` unchanged); never in an answer, a log line or
-- workflow history. Both are null when no previous secret is kept.
ALTER TABLE webhooks
  ADD COLUMN previous_secret            text,
  ADD COLUMN previous_secret_expires_at timestamptz,
  ADD CONSTRAINT webhooks_previous_secret_check CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL));

-- Down Migration

ALTER TABLE webhooks
  DROP CONSTRAINT webhooks_previous_secret_check,
  DROP COLUMN previous_secret,
  DROP COLUMN previous_secret_expires_at;
