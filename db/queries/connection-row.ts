/** A connection as the API shows it: never its credentials, only whether it has any. */
export interface ConnectionRow {
  id: string;
  tenant_id: string;
  provider_slug: string;
  app_key: string;
  status: 'active' | 'paused' | 'disabled';
  config: Record<string, unknown>;
  has_credentials: boolean;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

/** The select list that produces a ConnectionRow from `connections c`. */
export const CONNECTION_COLUMNS = `c.id, c.tenant_id, c.provider_slug, c.app_key, c.status, c.config,
  c.credentials is not null as has_credentials, c.metadata, c.created_at, c.updated_at`;
