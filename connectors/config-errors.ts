// Config rules every connector shares, and how every connector reports an invalid config: one `key: problem` line per zod issue, the key
// written as a person would look for it in their JSON (`resources.customers.records`, `fail[0]`).
import type { z } from 'zod';
import { issueProblem, listProblems } from '../policy/problems';
import { Permanent } from './types';

/** `fail[0].at_page` style: the key a person would look for in their JSON. */
export function keyPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : `${out ? '.' : ''}${String(part)}`;
  return out || '(config)';
}

/**
 * Validates `config` with a connector's schema and applies its defaults. Throws `Permanent`
 * ("<slug> connector: invalid config: key: problem; …"), because retrying cannot fix a config.
 */
export function parseConnectorConfig<S extends z.ZodType>(slug: string, schema: S, config: Record<string, unknown>): z.output<S> {
  const parsed = schema.safeParse(config ?? {});
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${keyPath(issue.path)}: ${issueProblem(issue)}`);
    throw new Permanent(`${slug} connector: invalid config: ${listProblems(problems)}`);
  }
  return parsed.data;
}

/** Whether `value` is an http(s) base URL without query, fragment or credentials (a provider's `base_url`). */
export function isBareHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'https:' || url.protocol === 'http:') && !url.search && !url.hash && !url.username && !url.password;
  } catch {
    return false;
  }
}

/**
 * Request headers a connection's config may not set (fixed `headers`, or the name of a header
 * carrying the secret): the hop-by-hop headers and the framing headers the HTTP client itself
 * writes (a `Transfer-Encoding` or `Content-Length` of the config's would desynchronise the
 * request), and the headers that name the host or route the request (`Host`, `Forwarded`,
 * `X-Forwarded-*`: they move the virtual host, and with it where the origin-bound credentials go),
 * and `Cookie` (a session credential: secrets belong in the credentials). Compared in lower case.
 */
export const REFUSED_HEADERS: readonly string[] = Object.freeze([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade',
  'content-length', 'expect', 'host', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-forwarded-port', 'x-real-ip',
  'cookie',
]);

/** Why a config may not set request header `name`, or null when it may. */
export function refusedHeaderProblem(name: string): string | null {
  return REFUSED_HEADERS.includes(name.toLowerCase())
    ? `'${name}' may not be set by a connection (hop-by-hop, framing, host-routing and cookie headers are refused)`
    : null;
}
