// Config rules every connector shares, and how every connector reports an invalid config: one `key: problem` line per zod issue, the key
// written as a person would look for it in their JSON (`resources.customers.records`, `fail[0]`).
import type { z } from 'zod';
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
    const problems = parsed.error.issues.map((issue) => `${keyPath(issue.path)}: ${issue.message}`);
    throw new Permanent(`${slug} connector: invalid config: ${problems.join('; ')}`);
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
