// The shared rate budget of a credential: which bounds apply. Pure: the settings come from
// configuration and the connection's config, and the database applies them atomically.

/** Bounds on one credential's requests. */
export interface BudgetLimits {
  /** Requests never spent: at this many left before the provider's reset, requests wait for it. */
  reserve: number;
  /** At most `ceiling.requests` per `ceiling.seconds` across all workers; null: no ceiling. */
  ceiling: { requests: number; seconds: number } | null;
}

/**
 * When a provider says its window resets: at a time (epoch seconds, by the provider's clock), or
 * in a number of seconds from its answer, which the budget counts on the database's clock (as it
 * counts every other time of the budget), never on the worker's: a worker whose clock is off
 * would move the reset by as much.
 */
export type StatedReset = { at: Date } | { inSeconds: number };

/** What a provider answered, as the budget is told: the status, and the remaining count and reset it stated (null: not stated). */
export interface ProviderAnswer {
  status: number;
  remaining: number | null;
  reset: StatedReset | null;
  /**
   * Seconds the provider asked every request of the credential to wait (see `rateLimitHold`),
   * counted from its answer; null or absent: it asked nothing.
   */
  holdSeconds?: number | null;
}

/**
 * How long a provider's answer holds back every request of its credential, in seconds: a 429, or a
 * 403 (GitHub's secondary rate limit), with a `Retry-After` of `retryAfter` seconds. The provider
 * limits the credential, not the one request: a wait stated so holds whatever remaining count it
 * states (GitHub's secondary limit comes with thousands left in the primary one), and whether it
 * states one at all. Null for any other answer.
 */
export function rateLimitHold(status: number, retryAfter: number | undefined): number | null {
  return (status === 429 || status === 403) && retryAfter !== undefined ? retryAfter : null;
}

/** Budget bounds as configured for a provider or a connection; unset fields fall back. */
export interface BudgetOverride {
  reserve?: number | undefined;
  perSecond?: number | undefined;
  perMinute?: number | undefined;
}

/** The deployment's budget settings: a default reserve and per-provider overrides. */
export interface BudgetSettings {
  reserve: number;
  providers: Record<string, BudgetOverride>;
}

/**
 * The furthest a provider's stated reset is believed, in seconds, unless configured otherwise
 * (RATE_BUDGET_MAX_RESET_SECONDS): a reset further away is taken as this far, so a provider (or a
 * connection's `rate_limit` header mapping) naming one decades away holds syncs back an hour at most.
 */
export const DEFAULT_MAX_RESET_SECONDS = 3600;

/**
 * The largest reserve or ceiling a budget takes (2^31 − 1): the budget's counts are Postgres
 * integers, and a statement given a larger bound fails.
 */
export const MAX_BUDGET_COUNT = 2_147_483_647;

/** Requests kept in reserve unless configured otherwise. */
export const DEFAULT_BUDGET_RESERVE = 5;

/** The settings of an unconfigured deployment: the default reserve, no ceilings. */
export const DEFAULT_BUDGET_SETTINGS: BudgetSettings = Object.freeze({ reserve: DEFAULT_BUDGET_RESERVE, providers: {} });

/**
 * The bounds of `provider`'s credential for one connection: the connection's own override wins
 * field by field over the provider's, which wins over the default reserve. Of the ceilings,
 * `perSecond` applies when set, else `perMinute`; neither: no ceiling.
 */
export function budgetLimits(provider: string, settings: BudgetSettings, connection: BudgetOverride = {}): BudgetLimits {
  // Own keys only: a slug such as "constructor" must not pick up Object.prototype members.
  const own = Object.hasOwn(settings.providers, provider) ? settings.providers[provider] : undefined;
  const reserve = connection.reserve ?? own?.reserve ?? settings.reserve;
  const perSecond = connection.perSecond ?? (connection.perMinute === undefined ? own?.perSecond : undefined);
  const perMinute = connection.perMinute ?? (connection.perSecond === undefined ? own?.perMinute : undefined);
  const ceiling = perSecond !== undefined ? { requests: perSecond, seconds: 1 } : perMinute !== undefined ? { requests: perMinute, seconds: 60 } : null;
  return { reserve, ceiling };
}
