-- Up Migration

-- A webhook disabled because its receiver answered 410 Gone (it takes no more webhooks at that
-- URL, and a sender stops sending to it): when, and why (the reason names the 410 and its time).
-- A disabled webhook gets no delivery of a new event, and each of its pending deliveries ends
-- failed at its next attempt without a request. Both are null while the webhook is enabled;
-- enabling it again (`PATCH /webhooks/{id}` with `enabled: true`) clears both.
ALTER TABLE webhooks
  ADD COLUMN disabled_at     timestamptz,
  ADD COLUMN disabled_reason text,
  ADD CONSTRAINT webhooks_disabled_check CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL));

-- Down Migration

ALTER TABLE webhooks
  DROP CONSTRAINT webhooks_disabled_check,
  DROP COLUMN disabled_at,
  DROP COLUMN disabled_reason;
