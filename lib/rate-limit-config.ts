// Rate-limit settings from the environment: global defaults, the separate
// rate-limit retry cap, and per-provider overrides as JSON. Validated up front so a typo stops the
// process at start instead of surfacing as a strange wait in some job hours later.
import { z } from 'zod';
import { DEFAULT_RATE_LIMIT_POLICY, DEFAULT_RATE_LIMIT_RETRY_CAP, policyFor, type RateLimitPolicy } from '../policy/rate-limit';
import { ConfigError } from './config';

/** Validated rate-limit configuration (the shape activities hand to job workflows). */
export interface RateLimitConfig {
  defaults: RateLimitPolicy;
  /** Per-provider overrides keyed by slug; unset fields fall back to `defaults`. */
  overrides: Record<string, Partial<RateLimitPolicy>>;
  /** Rate-limit retries a job may take before it fails. */
  retryCap: number;
}

/** Provider slugs as stored in `connections.provider_slug`. */
export const PROVIDER_SLUG_PATTERN = /^[a-z0-9_-]+$/;

const POSITIVE = 'must be a positive number';
const FRACTION = 'must be a number between 0 and 1';
const CAP = 'must be a non-negative integer';
const OVERRIDE_KEYS = ['base_seconds', 'max_seconds', 'jitter_factor'] as const;

// `VAR=` (set but empty, common in compose files) means "use the default", not zero.
const blankToUndefined = (value: unknown) => (typeof value === 'string' && value.trim() === '' ? undefined : value);

const positive = (fallback: number) =>
  z.preprocess(blankToUndefined, z.coerce.number({ error: POSITIVE }).positive(POSITIVE).default(fallback));

export const rateLimitEnvSchema = z.object({
  RATE_LIMIT_BASE_SECONDS: positive(DEFAULT_RATE_LIMIT_POLICY.baseSeconds),
  RATE_LIMIT_MAX_SECONDS: positive(DEFAULT_RATE_LIMIT_POLICY.maxSeconds),
  RATE_LIMIT_JITTER_FACTOR: z.preprocess(
    blankToUndefined,
    z.coerce.number({ error: FRACTION }).min(0, FRACTION).max(1, FRACTION).default(DEFAULT_RATE_LIMIT_POLICY.jitterFactor),
  ),
  // 0 is meaningful: fail a job on its first rate limit instead of waiting.
  RATE_LIMIT_RETRY_CAP: z.preprocess(
    blankToUndefined,
    z.coerce.number({ error: CAP }).int(CAP).min(0, CAP).default(DEFAULT_RATE_LIMIT_RETRY_CAP),
  ),
  RATE_LIMIT_OVERRIDES: z.preprocess(blankToUndefined, z.string().optional()),
});

// JSON numbers only (no "10" strings): the overrides are written by hand, so a quoted number is
// more likely a mistake than an intention.
const overrideSchema = z.strictObject({
  base_seconds: z.number({ error: POSITIVE }).positive(POSITIVE).optional(),
  max_seconds: z.number({ error: POSITIVE }).positive(POSITIVE).optional(),
  jitter_factor: z.number({ error: FRACTION }).min(0, FRACTION).max(1, FRACTION).optional(),
});

/**
 * Reads `RATE_LIMIT_BASE_SECONDS` (default 5), `RATE_LIMIT_MAX_SECONDS` (900),
 * `RATE_LIMIT_JITTER_FACTOR` (0.1, from 0 to 1), `RATE_LIMIT_RETRY_CAP` (20) and
 * `RATE_LIMIT_OVERRIDES` (JSON such as `{"github": {"base_seconds": 10}}`; keys `base_seconds`,
 * `max_seconds`, `jitter_factor`, nothing else; slugs match `^[a-z0-9_-]+$`). Max must be at least
 * base, for the defaults and for each provider after falling back to them. Throws a ConfigError
 * whose message names each invalid variable and its rule, e.g.
 * `RATE_LIMIT_OVERRIDES: github.base_seconds must be a positive number`.
 */
export function parseRateLimitConfig(env: NodeJS.ProcessEnv = process.env): RateLimitConfig {
  const problems: string[] = [];
  const parsed = rateLimitEnvSchema.safeParse(env);
  let defaults: RateLimitPolicy | undefined;
  let retryCap = DEFAULT_RATE_LIMIT_RETRY_CAP;
  let rawOverrides: string | undefined;

  if (parsed.success) {
    const e = parsed.data;
    defaults = { baseSeconds: e.RATE_LIMIT_BASE_SECONDS, maxSeconds: e.RATE_LIMIT_MAX_SECONDS, jitterFactor: e.RATE_LIMIT_JITTER_FACTOR };
    retryCap = e.RATE_LIMIT_RETRY_CAP;
    rawOverrides = e.RATE_LIMIT_OVERRIDES;
    if (defaults.maxSeconds < defaults.baseSeconds) {
      problems.push(`RATE_LIMIT_MAX_SECONDS: must be at least RATE_LIMIT_BASE_SECONDS = ${defaults.baseSeconds} (got ${defaults.maxSeconds})`);
      defaults = undefined;
    }
  } else {
    for (const issue of parsed.error.issues) {
      const name = String(issue.path[0] ?? '(environment)');
      const raw = env[name];
      problems.push(`${name}: ${issue.message}${raw === undefined ? '' : ` (got ${JSON.stringify(raw)})`}`);
    }
    const raw = blankToUndefined(env.RATE_LIMIT_OVERRIDES);
    rawOverrides = typeof raw === 'string' ? raw : undefined;
  }

  // Checked even when another variable is invalid, so one run reports every problem.
  const overrides = parseOverrides(rawOverrides, defaults, (message) => problems.push(`RATE_LIMIT_OVERRIDES: ${message}`));

  if (problems.length > 0 || defaults === undefined) {
    throw new ConfigError(`Invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`);
  }
  return { defaults, overrides, retryCap };
}

function parseOverrides(
  raw: string | undefined,
  defaults: RateLimitPolicy | undefined,
  report: (message: string) => void,
): Record<string, Partial<RateLimitPolicy>> {
  if (raw === undefined) return {};
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    report(`must be valid JSON (${(err as Error).message})`);
    return {};
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    report('must be a JSON object keyed by provider slug, e.g. {"github": {"base_seconds": 10}}');
    return {};
  }

  const entries: [string, Partial<RateLimitPolicy>][] = [];
  for (const [slug, value] of Object.entries(json)) {
    if (!PROVIDER_SLUG_PATTERN.test(slug)) {
      report(`${JSON.stringify(slug)} is not a valid provider slug (must match ${PROVIDER_SLUG_PATTERN.source})`);
      continue;
    }
    const result = overrideSchema.safeParse(value);
    if (!result.success) {
      for (const issue of result.error.issues) describeIssue(slug, issue).forEach(report);
      continue;
    }
    const own: Partial<RateLimitPolicy> = {};
    if (result.data.base_seconds !== undefined) own.baseSeconds = result.data.base_seconds;
    if (result.data.max_seconds !== undefined) own.maxSeconds = result.data.max_seconds;
    if (result.data.jitter_factor !== undefined) own.jitterFactor = result.data.jitter_factor;
    if (defaults !== undefined) {
      // Field-by-field fallback can combine an override with a default into max < base.
      const { baseSeconds: base, maxSeconds: max } = policyFor(slug, { [slug]: own }, defaults);
      if (max < base) {
        report(
          own.maxSeconds !== undefined
            ? `${slug}.max_seconds (${max}) must be at least base_seconds (${base}${own.baseSeconds === undefined ? ', from RATE_LIMIT_BASE_SECONDS' : ''})`
            : `${slug}.base_seconds (${base}) must not exceed max_seconds (${max}, from RATE_LIMIT_MAX_SECONDS)`,
        );
        continue;
      }
    }
    entries.push([slug, own]);
  }
  // fromEntries defines own properties, so even a slug like "__proto__" stays a plain key.
  return Object.fromEntries(entries);
}

// One message per offending key, each naming `slug.key` and the rule it broke.
function describeIssue(slug: string, issue: z.core.$ZodIssue): string[] {
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((key) => `${slug}.${key} is not a known key (allowed: ${OVERRIDE_KEYS.join(', ')})`);
  }
  if (issue.path.length === 0) return [`${slug} must be an object with any of ${OVERRIDE_KEYS.join(', ')}`];
  return [`${slug}.${issue.path.map(String).join('.')} ${issue.message}`];
}
