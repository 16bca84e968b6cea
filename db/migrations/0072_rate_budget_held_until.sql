-- Up Migration

-- A wait a provider asked of a credential (a 429, or GitHub's secondary-limit 403, with
-- Retry-After), on the database's clock: no request of the credential, from any worker or
-- connection, is sent before it. Null when none is pending. Independent of `remaining` and
-- `reset_at`: a secondary limit comes with the primary count far from spent.
ALTER TABLE rate_budgets ADD COLUMN held_until timestamptz;

-- Down Migration

ALTER TABLE rate_budgets DROP COLUMN held_until;
