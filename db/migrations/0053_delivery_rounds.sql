-- Up Migration

-- A delivery's attempts are numbered across its rounds (a redelivery starts a new round):
-- `round_attempts_before` is the attempts made before the current round began, and
-- `round_started_at` when Temporal scheduled the round's first attempt (the server's clock, which
-- the retry delays run on; null until it is made). A round's attempts set its retry delays, and
-- it is given up 25 hours after its start, whatever turns were deferred before it.
ALTER TABLE webhook_deliveries
  ADD COLUMN round_attempts_before integer     NOT NULL DEFAULT 0,
  ADD COLUMN round_started_at      timestamptz;

-- Down Migration

ALTER TABLE webhook_deliveries DROP COLUMN round_attempts_before, DROP COLUMN round_started_at;
