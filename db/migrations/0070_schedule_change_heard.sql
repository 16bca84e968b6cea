-- Up Migration

-- When (the database's clock) the API last stored a connection's schedule, and when its workflow
-- last planned a run from the stored schedule (enqueued or re-planned its scheduled job). The API
-- stores a schedule and then signals `replan`; a signal lost after the commit (Temporal unreachable,
-- or the API process gone) would leave a sleeping run on the old plan until its old time. The
-- reconcile tick sends `replan` again to an active connection whose scheduled job is still queued
-- from a plan older than its schedule.
ALTER TABLE connections
  ADD COLUMN schedule_changed_at timestamptz,
  ADD COLUMN schedule_planned_at timestamptz;

-- Down Migration

ALTER TABLE connections
  DROP COLUMN schedule_changed_at,
  DROP COLUMN schedule_planned_at;
