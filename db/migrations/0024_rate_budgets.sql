-- Up Migration

-- The shared, proactive rate budget of one provider credential, across every worker and every
-- connection that uses it. Keyed by a fingerprint of the credential (SHA-256 over the provider and
-- the credential, never the credential itself). `remaining` and `reset_at` are what the provider
-- last said (counted down by each request sent since); `window_started_at` and `window_count`
-- are the fixed window of the configured ceiling (requests per second or minute).
CREATE TABLE rate_budgets (
  fingerprint       text        PRIMARY KEY,
  provider          text        NOT NULL,
  remaining         integer,
  reset_at          timestamptz,
  window_started_at timestamptz NOT NULL DEFAULT now(),
  window_count      integer     NOT NULL DEFAULT 0,
  updated_at        timestamptz NOT NULL DEFAULT now()
);

-- Down Migration

DROP TABLE rate_budgets;
