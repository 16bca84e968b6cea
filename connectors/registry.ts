// Provider slug → connector. Activities look connectors up here by a connection's provider_slug,
// so adding a provider (e.g. `github`) is one registerConnector call at module load. The `demo`
// provider (synthetic data with fault-injection hooks) is registered only on request
// (DEMO_CONNECTOR: `npm start` and the tests), so a production deployment does not offer it.
import { createDemoConnector } from './demo';
import { githubConnector } from './github';
import { httpConnector } from './http';
import { Permanent, type Connector } from './types';

const connectors = new Map<string, Connector>();

/**
 * Registers `connector` under its slug, replacing any connector already registered there (tests
 * swap in fakes this way). Returns the connector it replaced, if any, so a test can restore it.
 */
export function registerConnector(connector: Connector): Connector | undefined {
  const previous = connectors.get(connector.slug);
  connectors.set(connector.slug, connector);
  return previous;
}

/** The connector of provider `slug`; throws `Permanent` (retrying cannot fix it) when unknown. */
export function getConnector(slug: string): Connector {
  const connector = connectors.get(slug);
  if (!connector) throw new Permanent(`unknown provider '${slug}'`);
  return connector;
}

/** The slugs of every registered provider, sorted. */
export function connectorSlugs(): string[] {
  return [...connectors.keys()].sort();
}

/**
 * Registers the `demo` provider: called by entry points when DEMO_CONNECTOR is on (a new one), and
 * by the tests' setup (the one whose worlds and fetch log they read).
 */
export function enableDemoConnector(connector: Connector = createDemoConnector()): void {
  registerConnector(connector);
}

registerConnector(githubConnector);
registerConnector(httpConnector);
