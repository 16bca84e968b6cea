// The shapes a connector hands the platform and the platform stores: shared by connectors/ and
// db/, so they live on the floor both stand on (types only).

/** One record as a provider returns it. */
export interface ConnectorRecord {
  /** The provider's stable id of the record within its resource type. */
  externalId: string;
  /** When the provider last changed it (ISO 8601), if the provider says. */
  updatedAt: string | null;
  data: Record<string, unknown>;
  /** The partition the record was listed in (see `Connector.partitions`); '' when absent. */
  partition?: string;
}

/** A validator stored for one page URL: its ETag, and what comes after that page. */
export interface StoredValidator {
  etag: string;
  /** The connector's own note of what follows the page (e.g. the next page's URL), or null: the page was its listing's last. */
  next: string | null;
}
