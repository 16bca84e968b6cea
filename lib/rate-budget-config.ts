// The shared rate budget's settings from the environment: the default reserve and per-provider
// reserves and ceilings as JSON. Validated up front, naming the variable and key at fault.
import { z } from 'zod';
import { DEFAULT_BUDGET_RESERVE, MAX_BUDGET_COUNT, type BudgetOverride, type BudgetSettings } from '../policy/rate-budget';
import { ConfigError } from './config';
import { PROVIDER_SLUG_PATTERN } from './rate-limit-config';

/** The rule of a count from `min` to MAX_BUDGET_COUNT (the largest the budget's statements take). */
const wholeRule = (min: number) => `must be a whole number from ${min} to ${MAX_BUDGET_COUNT}`;
const WHOLE = (min: number) => z.number({ error: wholeRule(min) }).int(wholeRule(min)).min(min, wholeRule(min)).max(MAX_BUDGET_COUNT, wholeRule(min));

const providerSchema = z.strictObject({ reserve: WHOLE(0).optional(), per_second: WHOLE(1).optional(), per_minute: WHOLE(1).optional() });

/**
 * Reads `RATE_BUDGET_RESERVE` (requests never spent before a provider's reset; default 5) and
 * `RATE_BUDGETS` (JSON keyed by provider slug, e.g. `{"github": {"reserve": 50, "per_second": 10}}`;
 * keys `reserve`, `per_second`, `per_minute`), each a whole number up to MAX_BUDGET_COUNT. Throws a
 * ConfigError naming each problem.
 */
export function parseRateBudgetConfig(env: NodeJS.ProcessEnv = process.env): BudgetSettings {
  const problems: string[] = [];
  let reserve = DEFAULT_BUDGET_RESERVE;
  const rawReserve = env.RATE_BUDGET_RESERVE?.trim();
  if (rawReserve) {
    if (/^\d+$/.test(rawReserve) && Number(rawReserve) <= MAX_BUDGET_COUNT) reserve = Number(rawReserve);
    else problems.push(`RATE_BUDGET_RESERVE: ${wholeRule(0)} (got ${JSON.stringify(env.RATE_BUDGET_RESERVE)})`);
  }
  const providers: Record<string, BudgetOverride> = {};
  const raw = env.RATE_BUDGETS?.trim();
  if (raw) {
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (err) {
      problems.push(`RATE_BUDGETS: must be valid JSON (${(err as Error).message})`);
    }
    if (json !== undefined) {
      if (typeof json !== 'object' || json === null || Array.isArray(json)) {
        problems.push('RATE_BUDGETS: must be a JSON object keyed by provider slug, e.g. {"github": {"reserve": 50}}');
      } else {
        for (const [slug, value] of Object.entries(json)) {
          if (!PROVIDER_SLUG_PATTERN.test(slug)) {
            problems.push(`RATE_BUDGETS: ${JSON.stringify(slug)} is not a valid provider slug`);
            continue;
          }
          const parsed = providerSchema.safeParse(value);
          if (!parsed.success) {
            for (const issue of parsed.error.issues) {
              const keys = issue.code === 'unrecognized_keys' ? issue.keys.map((k) => `${slug}.${k} is not a known key (allowed: reserve, per_second, per_minute)`) : [`${[slug, ...issue.path.map(String)].join('.')} ${issue.message}`];
              for (const k of keys) problems.push(`RATE_BUDGETS: ${k}`);
            }
            continue;
          }
          providers[slug] = { reserve: parsed.data.reserve, perSecond: parsed.data.per_second, perMinute: parsed.data.per_minute };
        }
      }
    }
  }
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`);
  return { reserve, providers: Object.fromEntries(Object.entries(providers)) };
}
