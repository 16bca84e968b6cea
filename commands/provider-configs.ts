// The connection config each provider accepts, as its connector validates it, for those (the API)
// that must describe and check a config without importing connectors themselves.
import { demoConfigSchema } from '../connectors/demo';
import { GITHUB_CREDENTIALS_DOC, githubConfigSchema } from '../connectors/github';
import { httpConfigSchema } from '../connectors/http';
import { connectorSlugs, getConnector } from '../connectors/registry';
import { deselection, reselected, type Deselection, type DeselectedUnit } from '../connectors/selection';

/** The zod schema of each provider's connection config (the connector's own). */
export const PROVIDER_CONFIG_SCHEMAS = { demo: demoConfigSchema, github: githubConfigSchema, http: httpConfigSchema } as const;

/** Credentials that share another connection's OAuth 2 grant (any provider; checked by the command). */
export const SHARED_GRANT_DOC = {
  type: 'object',
  title: "Another connection's OAuth 2 grant",
  description:
    "Shares the OAuth 2 grant of another connection of the same tenant: one refresh serves every connection of the grant, and a refused grant makes them all `needs_reauth`. 404 when the id names no connection of the tenant; 409 `grant_source_not_oauth2` when that connection holds no oauth2 grant.",
  properties: {
    kind: { type: 'string', enum: ['oauth2'] },
    grant_from_connection: { type: 'string', format: 'uuid', description: 'The id of a connection of the same tenant holding an oauth2 grant' },
  },
  required: ['kind', 'grant_from_connection'],
  additionalProperties: false,
} as const;

/** The JSON Schema of each provider's credentials, where the connector states one (for the API's document). */
export const PROVIDER_CREDENTIALS_DOCS: Partial<Record<keyof typeof PROVIDER_CONFIG_SCHEMAS, Record<string, unknown>>> = {
  github: { oneOf: [...GITHUB_CREDENTIALS_DOC.oneOf, SHARED_GRANT_DOC] },
};

/** A provider the API knows the config schema of. */
export type ProviderSlug = keyof typeof PROVIDER_CONFIG_SCHEMAS;

/**
 * What `provider`'s connector finds wrong with `config` about to be stored (naming the offending
 * key, including the rules its schema cannot state, such as a demo `world` that must exist, and
 * those only a new or changed config is held to, such as no credential in an http config's fixed
 * headers), or null when it accepts it.
 */
export function configProblem(provider: string, config: Record<string, unknown>): string | null {
  if (!connectorSlugs().includes(provider)) return `unknown provider '${provider}' (known: ${connectorSlugs().join(', ')})`;
  try {
    const connector = getConnector(provider);
    connector.resourceTypes(config);
    return connector.writeProblem?.(config) ?? null;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * `next` as it is to be stored over `current` for `provider`: names the provider takes as one
 * already configured keep the stored spelling (the connector's `keepSpelling`: GitHub's
 * repositories, ignoring letter case), since records' ids and cursors name them. `next` as given
 * for a connector without the rule.
 */
export function keepSpelling(provider: string, current: Record<string, unknown>, next: Record<string, unknown>): Record<string, unknown> {
  if (!connectorSlugs().includes(provider)) return next;
  return getConnector(provider).keepSpelling?.(current, next) ?? next;
}

/**
 * What a `provider` connection's config change from `before` to `after` stops selecting (resource
 * types, and partitions such as GitHub repositories): see `deselection`. Nothing for an unknown
 * provider.
 */
export function deselectedBy(provider: string, before: Record<string, unknown>, after: Record<string, unknown>): Deselection {
  if (!connectorSlugs().includes(provider)) return { resourceTypes: [], partitions: [] };
  return deselection(getConnector(provider), before, after);
}

/**
 * What `provider` connection config `config` selects again of deselected `unit`: see `reselected`.
 * All of it for an unknown provider (none of its records can be judged, so none is tombstoned).
 */
export function reselectedBy(provider: string, config: Record<string, unknown>, unit: DeselectedUnit): 'all' | { keep: string[] } {
  if (!connectorSlugs().includes(provider)) return 'all';
  return reselected(getConnector(provider), config, unit);
}

/**
 * Where `provider`'s requests for `config` go (`key`: the config key naming it), or null for a
 * provider without network access or a config its connector rejects.
 */
export function endpointOf(provider: string, config: Record<string, unknown>): { key: string; url: string } | null {
  if (!connectorSlugs().includes(provider)) return null;
  const connector = getConnector(provider);
  try {
    return connector.endpoint?.(config) ?? null;
  } catch {
    return null;
  }
}

/**
 * What credentials of `provider` given `config` are bound to: the origin they are sent to and how
 * they are presented (the auth scheme and the header or parameter carrying them), as one string
 * compared for equality; null for a provider without network access or a config its connector
 * rejects.
 */
export function credentialBinding(provider: string, config: Record<string, unknown>): string | null {
  const url = endpointOf(provider, config)?.url;
  if (!url) return null;
  let origin: string;
  try {
    origin = new URL(url).origin;
  } catch {
    return null;
  }
  let use = '';
  try {
    use = getConnector(provider).credentialUse?.(config) ?? '';
  } catch {
    return null;
  }
  return JSON.stringify([origin, use]);
}

/** What keeps a token the platform obtains (an OAuth 2 grant) from being sent with `provider`'s `config`, or null. */
export function tokenProblem(provider: string, config: Record<string, unknown>): string | null {
  if (!connectorSlugs().includes(provider)) return null;
  return getConnector(provider).tokenProblem?.(config) ?? null;
}

/**
 * What `provider`'s connector finds wrong with `credentials` (`key: problem`, never the value),
 * with the connection's `config` when given also what it would not send of them, or null.
 */
export function credentialsProblem(provider: string, credentials: Record<string, unknown>, config?: Record<string, unknown>): string | null {
  if (!connectorSlugs().includes(provider)) return null;
  return getConnector(provider).credentialsProblem?.(credentials, config) ?? null;
}

/**
 * The resource types of a `provider` connection whose listing (`Connector.listing`) differs
 * between config `before` and `after`: one listed by only one of them counts. None for a
 * connector without listings, or when either config is one its connector rejects.
 */
export function changedListings(provider: string, before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  const connector = getConnector(provider);
  if (!connector.listing) return [];
  try {
    const types = new Set([...connector.resourceTypes(before), ...connector.resourceTypes(after)]);
    return [...types].filter((type) => connector.listing!(before, type) !== connector.listing!(after, type));
  } catch {
    return [];
  }
}
