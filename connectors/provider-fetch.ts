// The one HTTP path of connectors: every request a connector sends to its provider goes through
// `providerGet`, so bounds on outbound requests and the shared rate budget apply to all of them.
// It makes exactly one request (no retries, no redirects of its own beyond fetch's), reads the
// whole body, and maps a network failure to `Transient`; an aborted signal rethrows its reason.
import { z } from 'zod';
import { Transient, type RequestBudget } from './types';

/** Where a provider states its rate limit in response headers. */
export interface RateLimitHeaders {
  /** Header with the requests left in the current window, e.g. `x-ratelimit-remaining`. */
  remaining: string;
  /** Header with the window's reset, e.g. `x-ratelimit-reset`. */
  reset: string;
  /** `epoch_seconds` (GitHub: a Unix time) or `delta_seconds` (seconds from now). */
  resetFormat: 'epoch_seconds' | 'delta_seconds';
}

/** GitHub's rate-limit headers. */
export const GITHUB_RATE_LIMIT_HEADERS: RateLimitHeaders = {
  remaining: 'x-ratelimit-remaining',
  reset: 'x-ratelimit-reset',
  resetFormat: 'epoch_seconds',
};

/** What a provider answered: status, headers and the whole body as text. */
export interface ProviderAnswer {
  status: number;
  ok: boolean;
  headers: Headers;
  text: string;
}

/** Options of `providerGet`. */
export interface ProviderGetOptions {
  headers: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** The message of a network failure, given its description (the caller names itself and the target). */
  networkError: (detail: string) => string;
  /** Removes secrets from any text that may end up in an error. */
  redact: (text: string) => string;
  /** The shared budget of the credential: asked before the request, told what the answer said. */
  budget?: RequestBudget | undefined;
  /** Where the provider states its remaining requests (read into the budget). */
  rateLimitHeaders?: RateLimitHeaders | undefined;
}

const isAbort = (err: unknown, signal: AbortSignal | undefined) =>
  signal?.aborted === true || (err instanceof Error && err.name === 'AbortError');

/** A short description of a network error (its code when undici gives one). */
export function describeNetworkError(err: unknown): string {
  const cause = err instanceof Error ? (err as Error & { cause?: unknown }).cause : undefined;
  const code = cause && typeof cause === 'object' && 'code' in cause ? String((cause as { code: unknown }).code) : '';
  const message = err instanceof Error ? err.message : String(err);
  const causeMessage = cause instanceof Error ? cause.message : '';
  return [message, code, causeMessage].filter(Boolean).join(': ');
}

/** The remaining count and reset time a provider stated in `headers`, each null when absent or unreadable. */
export function readRateLimit(headers: Headers, names: RateLimitHeaders, nowMs: number = Date.now()): { remaining: number | null; resetAt: Date | null } {
  const remainingText = headers.get(names.remaining)?.trim() ?? '';
  const resetText = headers.get(names.reset)?.trim() ?? '';
  const remaining = /^\d+$/.test(remainingText) ? Number(remainingText) : null;
  let resetAt: Date | null = null;
  if (/^\d+(\.\d+)?$/.test(resetText)) {
    const value = Number(resetText);
    resetAt = new Date(names.resetFormat === 'epoch_seconds' ? value * 1000 : nowMs + value * 1000);
  }
  return { remaining, resetAt };
}

/** One GET through the connectors' HTTP path; see the module comment. */
export async function providerGet(url: string, opts: ProviderGetOptions): Promise<ProviderAnswer> {
  const { signal } = opts;
  await opts.budget?.acquire(signal);
  let response: Response;
  let text: string;
  try {
    response = await fetch(url, {
      method: 'GET',
      headers: opts.headers,
      ...(signal ? { signal } : {}),
    });
    text = await response.text();
  } catch (err) {
    if (isAbort(err, signal)) throw signal?.reason ?? err;
    throw new Transient(opts.redact(opts.networkError(describeNetworkError(err))));
  }
  if (opts.budget) {
    const stated = opts.rateLimitHeaders ? readRateLimit(response.headers, opts.rateLimitHeaders) : { remaining: null, resetAt: null };
    await opts.budget.report({ status: response.status, ...stated });
  }
  return { status: response.status, ok: response.ok, headers: response.headers, text };
}

/**
 * A connection's own bounds on its credential's shared rate budget (`config.rate_budget`), over the
 * provider's: requests kept in reserve (never spent: the budget waits for the reset instead), and
 * a ceiling of requests per second and/or per minute across every worker using the credential.
 */
export const rateBudgetConfigSchema = z
  .strictObject({
    reserve: z.number({ error: 'must be a whole number ≥ 0' }).int('must be a whole number ≥ 0').min(0, 'must be a whole number ≥ 0').optional(),
    per_second: z.number({ error: 'must be a whole number ≥ 1' }).int('must be a whole number ≥ 1').min(1, 'must be a whole number ≥ 1').optional(),
    per_minute: z.number({ error: 'must be a whole number ≥ 1' }).int('must be a whole number ≥ 1').min(1, 'must be a whole number ≥ 1').optional(),
  })
  .meta({
    description:
      "Overrides this provider's shared rate budget for this connection's credential: `reserve` (requests never spent; the sync waits for the provider's reset instead), `per_second` / `per_minute` (a ceiling across all workers)",
  });

/** A validated `config.rate_budget`. */
export type RateBudgetConfig = z.output<typeof rateBudgetConfigSchema>;
