// The connection config each provider accepts, as its connector validates it, for those (the API)
// that must describe and check a config without importing connectors themselves.
import { demoConfigSchema } from '../connectors/demo';
import { githubConfigSchema } from '../connectors/github';
import { httpConfigSchema } from '../connectors/http';
import { connectorSlugs, getConnector } from '../connectors/registry';

/** The zod schema of each provider's connection config (the connector's own). */
export const PROVIDER_CONFIG_SCHEMAS = { demo: demoConfigSchema, github: githubConfigSchema, http: httpConfigSchema } as const;

/** A provider the API knows the config schema of. */
export type ProviderSlug = keyof typeof PROVIDER_CONFIG_SCHEMAS;

/**
 * What `provider`'s connector finds wrong with `config` (naming the offending key, including the
 * rules its schema cannot state, such as a demo `world` that must exist), or null when it accepts it.
 */
export function configProblem(provider: string, config: Record<string, unknown>): string | null {
  if (!connectorSlugs().includes(provider)) return `unknown provider '${provider}' (known: ${connectorSlugs().join(', ')})`;
  try {
    getConnector(provider).resourceTypes(config);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}
