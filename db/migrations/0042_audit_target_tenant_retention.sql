-- Up Migration

-- A tenant key's call the tenant scope refuses because it names another tenant (its connection,
-- job, webhook or purge, or its tenant_id) is audited under the caller's tenant and, in
-- target_tenant_id, under the tenant it aimed at, so that tenant's audit log shows the attempt.
ALTER TABLE audit_log ADD COLUMN target_tenant_id text;
CREATE INDEX audit_log_target_tenant_idx ON audit_log (target_tenant_id, id DESC) WHERE target_tenant_id IS NOT NULL;
-- Retention (AUDIT_LOG_RETENTION_DAYS) deletes the oldest entries in batches by time.
CREATE INDEX audit_log_at_idx ON audit_log (at);

-- Down Migration

DROP INDEX audit_log_at_idx;
DROP INDEX audit_log_target_tenant_idx;
ALTER TABLE audit_log DROP COLUMN target_tenant_id;
