-- Up Migration

-- What the latest reconcile tick counted: the active connections overdue for their scheduled run
-- (`sync_scheduler_backlog`) and, by provider, those whose last success is older than twice
-- their interval (`synctide_stale_connections`, `{"<provider>": n}`). One row, replaced by each
-- tick unless a later tick already wrote it; every API and worker process reads it at scrape time,
-- so the gauges are the same on all of them whichever worker ran the tick, at the cost of one
-- primary-key read (the counts themselves scan every active connection, once per tick).
CREATE TABLE schedule_counts (
  id         boolean     PRIMARY KEY DEFAULT true CHECK (id),
  counted_at timestamptz NOT NULL,
  overdue    integer     NOT NULL CHECK (overdue >= 0),
  stale      jsonb       NOT NULL
);

-- Down Migration

DROP TABLE schedule_counts;
