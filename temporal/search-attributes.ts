import { defineSearchAttributeKey } from '@temporalio/common';

// Typed keys for Synctide's custom search attributes, shared by workflows (upserts) and
// clients (start options, visibility queries). Names are namespaced to avoid clashes.

/** The connection a run belongs to. */
export const CONNECTION_ID = defineSearchAttributeKey('SynctideConnectionId', 'KEYWORD');
/** The tenant that owns the connection. */
export const TENANT_ID = defineSearchAttributeKey('SynctideTenantId', 'KEYWORD');
/** Provider slug of the connection, e.g. `github`. */
export const PROVIDER = defineSearchAttributeKey('SynctideProvider', 'KEYWORD');
/** Live phase of a connection workflow: sleeping, running, paused, backing_off. */
export const PHASE = defineSearchAttributeKey('SynctidePhase', 'KEYWORD');

/** Every Synctide search attribute, for registration with a namespace. */
export const SYNCTIDE_SEARCH_ATTRIBUTES = [CONNECTION_ID, TENANT_ID, PROVIDER, PHASE] as const;
