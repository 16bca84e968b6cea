-- Up Migration

-- A connection's webhook events, found by its id: each batch of a connection's purge deleted them
-- by reading every event of every connection.
CREATE INDEX webhook_events_connection_idx ON webhook_events (connection_id);

-- An event's deliveries, found by its id: deleting an event (a purge, the retention clean-up)
-- cascades to them, and whether an event is finished (none of its deliveries pending) is asked
-- of each event those deletes choose. Only the unique (webhook_id, event_id) led to them before.
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);

-- Down Migration

DROP INDEX webhook_deliveries_event_idx;
DROP INDEX webhook_events_connection_idx;
