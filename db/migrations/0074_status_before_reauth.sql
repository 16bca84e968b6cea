-- Up Migration

-- What a connection's status was (active or paused) when a refusal of its credential marked it
-- `needs_reauth`; null otherwise. A refusal that turns out to be of a refresh token another worker
-- spent (its renewal stored after the refusal) is undone by giving each connection it marked this
-- status back: a paused connection stays paused.
ALTER TABLE connections ADD COLUMN status_before_reauth text
  CONSTRAINT connections_status_before_reauth_check CHECK (status_before_reauth IN ('active', 'paused'));

-- Down Migration

ALTER TABLE connections DROP COLUMN status_before_reauth;
