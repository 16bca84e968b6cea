// The shared, proactive rate budget of a provider credential, as the connectors' HTTP path asks it
// before each request: across every worker (a row in Postgres, keyed by a fingerprint of the
// credential, never the credential itself), so two connections sharing one token share its limit.
import { createHash } from 'node:crypto';
import { RateLimited, type RequestBudget } from '../connectors/types';
import { rateBudgetConfigSchema } from '../connectors/provider-http';
import { ensureBudget, findBudgetWait, reportBudget, spendBudget } from '../db/models/rate-budgets';
import type { Pool } from '../db/pool';
import type { SyncMetrics } from '../lib/metrics';
import { budgetLimits, type BudgetSettings } from '../policy/rate-budget';

/** Waits shorter than this (a full per-second window) are waited out in place; longer ones are durable. */
const IN_PLACE_WAIT_MS = 5_000;

/** Object keys sorted at every level, so equal credentials give one JSON text. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical((value as Record<string, unknown>)[k])]));
  }
  return value;
}

/**
 * The fingerprint of a provider credential: SHA-256 over a fixed label, the provider and the
 * credential's canonical JSON. One-way: the budget table never holds the credential itself.
 */
export function credentialFingerprint(provider: string, credentials: Record<string, unknown>): string {
  return createHash('sha256').update('synctide rate budget v1\0').update(provider).update('\0').update(JSON.stringify(canonical(credentials))).digest('hex');
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });

/**
 * The budget of `credentials` for a connection of `provider` (none without credentials). Before
 * each request it takes one unit; when the provider's remaining count is down to the reserve it
 * throws `RateLimited` with the time to the reset, so the job workflow waits durably (a timer, and
 * the job's `retry_after`) instead of spending the last requests. A full ceiling window shorter
 * than a few seconds is waited out in place. After each answer it records what the provider said.
 * The connection's `config.rate_budget` overrides the provider's settings; an invalid one is ignored.
 */
export function requestBudget(opts: {
  pool: Pool;
  metrics: SyncMetrics;
  settings: BudgetSettings;
  provider: string;
  credentials: Record<string, unknown> | null;
  config: Record<string, unknown>;
}): RequestBudget | undefined {
  const { pool, metrics, provider, credentials } = opts;
  if (!credentials || Object.keys(credentials).length === 0) return undefined;
  const own = rateBudgetConfigSchema.safeParse(opts.config.rate_budget ?? {});
  const override = own.success ? { reserve: own.data.reserve, perSecond: own.data.per_second, perMinute: own.data.per_minute } : {};
  const limits = budgetLimits(provider, opts.settings, override);
  const fingerprint = credentialFingerprint(provider, credentials);
  let ensured = false;
  return {
    async acquire(signal) {
      if (!ensured) {
        await ensureBudget(pool, fingerprint, provider);
        ensured = true;
      }
      for (;;) {
        if (await spendBudget(pool, fingerprint, limits.reserve, limits.ceiling)) {
          metrics.connectorRequests.inc({ provider });
          return;
        }
        const wait = await findBudgetWait(pool, fingerprint, limits.reserve, limits.ceiling);
        const until = wait.reserveUntil ?? wait.ceilingUntil;
        if (until === null) {
          // Freed meanwhile (a reset passed, a window ended): try again, without spinning.
          await sleep(20, signal);
          continue;
        }
        const ms = until.getTime() - wait.now.getTime();
        const reason = wait.reserveUntil ? 'reserve' : 'ceiling';
        metrics.connectorBudgetWaits.inc({ provider, reason });
        if (reason === 'ceiling' && ms <= IN_PLACE_WAIT_MS) {
          await sleep(Math.max(ms, 1), signal);
          continue;
        }
        throw new RateLimited(
          reason === 'reserve'
            ? `${provider} connector: the credential's shared rate budget is down to its reserve (${wait.remaining} left of ${limits.reserve} kept); waiting for the provider's reset at ${until.toISOString()}`
            : `${provider} connector: the credential's request ceiling (${limits.ceiling?.requests} per ${limits.ceiling?.seconds} s) is reached; waiting until ${until.toISOString()}`,
          Math.max(1, Math.ceil(ms / 1000)),
        );
      }
    },
    async report(answer) {
      const remaining = await reportBudget(pool, fingerprint, answer);
      if (remaining !== null) metrics.connectorBudgetRemaining.set({ provider }, remaining);
    },
  };
}
