-- Up Migration

-- Webhooks: a tenant's endpoints, the events Synctide emits, and one delivery of each event to
-- each endpoint subscribed to its type, with every attempt. An event and its deliveries are
-- written in the transaction that makes the event true (a job finishing, a breaker opening), so
-- none is lost or invented; a `webhook-delivery:<id>` workflow then delivers each one, and the
-- reconcile tick starts any whose workflow was never started (`workflow_started_at` is null).
CREATE TABLE webhooks (
  id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id   text        NOT NULL,
  url         text        NOT NULL,
  event_types text[]      NOT NULL CONSTRAINT webhooks_event_types_check CHECK (cardinality(event_types) > 0),
  -- The signing secret: HMAC needs the secret itself, so it cannot be stored as a hash. Shown
  -- once, when the webhook is created; never in an answer, a log line or workflow history.
  secret      text        NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_tenant_idx ON webhooks (tenant_id, id);

-- `id` is the event's idempotency id: every delivery of the event, and every retry, carries it.
CREATE TABLE webhook_events (
  id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id     text        NOT NULL,
  connection_id uuid,
  event_type    text        NOT NULL,
  payload       jsonb       NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_events_created_idx ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
  id                  uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  webhook_id          uuid        NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  event_id            uuid        NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
  status              text        NOT NULL DEFAULT 'pending'
                                  CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts            integer     NOT NULL DEFAULT 0,
  last_status_code    integer,
  last_error          text,
  created_at          timestamptz NOT NULL DEFAULT now(),
  workflow_started_at timestamptz,
  finished_at         timestamptz,
  CONSTRAINT webhook_deliveries_once UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, created_at DESC, id);
CREATE INDEX webhook_deliveries_unstarted_idx ON webhook_deliveries (created_at) WHERE workflow_started_at IS NULL;

-- One row per attempt: the answer's status code, or why there was none.
CREATE TABLE webhook_delivery_attempts (
  delivery_id uuid        NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt     integer     NOT NULL,
  status_code integer,
  error       text,
  duration_ms integer     NOT NULL,
  at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (delivery_id, attempt)
);

-- Down Migration

DROP TABLE webhook_delivery_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_events;
DROP TABLE webhooks;
