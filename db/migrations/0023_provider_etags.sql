-- Up Migration

-- Conditional requests: the ETag a provider sent for the first page of a listing (keyed by that
-- page's exact URL), per connection and resource type. Written in the transaction that stores the
-- last page of the pass that began with it, so a later 304 ("unchanged") can only ever skip
-- records an earlier pass stored in full.
CREATE TABLE provider_etags (
  connection_id uuid        NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  resource_type text        NOT NULL,
  url           text        NOT NULL,
  etag          text        NOT NULL,
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (connection_id, resource_type, url)
);

-- Down Migration

DROP TABLE provider_etags;
