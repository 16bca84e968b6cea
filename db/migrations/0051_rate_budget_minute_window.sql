-- Up Migration

-- A credential's request ceiling is counted in two fixed windows, a second and a minute, each
-- holding every request sent with the credential (by any connection, with a ceiling or without):
-- `window_started_at`/`window_count` are now the one-second window, and these the one-minute one.
-- A connection with a per-second ceiling checks the first, one with a per-minute ceiling the
-- second. Before, one window served both lengths, so a request of a per-second connection
-- restarted the window a per-minute connection of the same credential counted in, and let it
-- past its ceiling.
ALTER TABLE rate_budgets
  ADD COLUMN minute_window_started_at timestamptz NOT NULL DEFAULT now(),
  ADD COLUMN minute_window_count      integer     NOT NULL DEFAULT 0;

-- Down Migration

ALTER TABLE rate_budgets DROP COLUMN minute_window_started_at, DROP COLUMN minute_window_count;
