// The shared, proactive rate budget of a tenant's provider credential, as the connectors' HTTP path
// asks it before each request: across every worker (a row in Postgres, keyed by a keyed fingerprint
// of the tenant and the credential, never the credential itself), so two connections of a tenant
// sharing one token share its limit, and another tenant holding the same token has a budget of its
// own (its connections cannot spend or poison this one).
import { createHmac } from 'node:crypto';
import { RateLimited, type RequestBudget } from '../connectors/types';
import { rateBudgetConfigSchema } from '../connectors/provider-http';
import { ensureBudget, findBudgetWait, reportBudget, spendBudget } from '../db/models/rate-budgets';
import type { Pool } from '../db/pool';
import { derivedKey, type Keyring } from '../lib/credentials';
import type { SyncMetrics } from '../lib/metrics';
import { budgetLimits, DEFAULT_MAX_RESET_SECONDS, MAX_BUDGET_COUNT, type BudgetSettings, type ProviderAnswer } from '../policy/rate-budget';
import type { BudgetWaitReason } from '../policy/vocabulary';

/** Waits shorter than this (a full per-second window) are waited out in place; longer ones are durable. */
const IN_PLACE_WAIT_MS = 5_000;
/** Refusals in a row that name no time to wait for, before a request gives up (RateLimited, 1 s). */
const MAX_FREED_RETRIES = 50;

/** Object keys sorted at every level, so equal credentials give one JSON text. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical((value as Record<string, unknown>)[k])]));
  }
  return value;
}

/**
 * The fingerprint of a tenant's provider credential: HMAC-SHA256, keyed by a key derived from the
 * credentials keyring's active key, over the tenant, the provider and the credential's canonical
 * JSON. One-way and keyed: the budget table never holds the credential, and a dump of it without
 * the keyring allows no offline guessing. It changes with the active key (a rotation starts
 * budgets afresh: they are soft state).
 */
export function credentialFingerprint(keyring: Keyring, tenantId: string, provider: string, credentials: Record<string, unknown>): string {
  return createHmac('sha256', derivedKey(keyring, 'rate-budget-fingerprint-v2'))
    .update(JSON.stringify([tenantId, provider, canonical(credentials)]))
    .digest('hex');
}

/**
 * What a provider stated, as the budget's row can hold it: a remaining count above
 * MAX_BUDGET_COUNT (an "unlimited" plan's 2^32 - 1, or whatever a mapped header says) as
 * MAX_BUDGET_COUNT, which no reserve reaches, and a reset no date can hold (past year 275760, in
 * epoch seconds or in seconds from now) as no reset. Either would otherwise fail the statement,
 * and with it every request of the credential.
 */
function storableAnswer(answer: ProviderAnswer): ProviderAnswer {
  const { remaining, reset } = answer;
  const datable = (ms: number) => Number.isFinite(new Date(ms).getTime());
  const storable = reset !== null && ('at' in reset ? datable(reset.at.getTime()) : datable(Date.now() + reset.inSeconds * 1000));
  return {
    ...answer,
    remaining: remaining === null ? null : Math.min(remaining, MAX_BUDGET_COUNT),
    reset: storable ? reset : null,
  };
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
 * What a connection without credentials keys its budget by, in place of a credential: the origin
 * of its `base_url` (a provider limits such requests by client, so a tenant's connections to one
 * origin share its limit, and those to other origins have budgets of their own); '' when it has none.
 */
function anonymousKey(config: Record<string, unknown>): Record<string, unknown> {
  let origin = '';
  try {
    origin = typeof config.base_url === 'string' ? new URL(config.base_url).origin : '';
  } catch {
    // Not a URL: the connector refuses the config before any request.
  }
  return { no_credentials: origin };
}

/**
 * The budget of `credentials` for a connection of `tenantId` and `provider`; without credentials,
 * of the connection's origin (`anonymousKey`), so its reserve, ceilings and what the provider
 * states hold it back as any other. Before each request it takes one unit; when the provider's remaining count is down
 * to the reserve it throws `RateLimited` with the time to the reset, so the job workflow waits
 * durably (a timer, and the job's `retry_after`) instead of spending the last requests. A full
 * ceiling window shorter than a few seconds is waited out in place. After each answer it records
 * what the provider said; a stated reset more than `maxResetSeconds` away is taken as that far,
 * and the error of a wait for it says so. The connection's `config.rate_budget` overrides the
 * provider's settings; an invalid one is ignored.
 */
export function requestBudget(opts: {
  pool: Pool;
  metrics: SyncMetrics;
  keyring: Keyring;
  settings: BudgetSettings;
  /** RATE_BUDGET_MAX_RESET_SECONDS (default DEFAULT_MAX_RESET_SECONDS). */
  maxResetSeconds?: number | undefined;
  tenantId: string;
  /** The connection using the budget (recorded, so its purge can delete budgets no other connection uses). */
  connectionId?: string;
  provider: string;
  credentials: Record<string, unknown> | null;
  config: Record<string, unknown>;
}): RequestBudget {
  const { pool, metrics, provider, tenantId } = opts;
  const credentials = opts.credentials && Object.keys(opts.credentials).length > 0 ? opts.credentials : anonymousKey(opts.config);
  const own = rateBudgetConfigSchema.safeParse(opts.config.rate_budget ?? {});
  const override = own.success ? { reserve: own.data.reserve, perSecond: own.data.per_second, perMinute: own.data.per_minute } : {};
  const limits = budgetLimits(provider, opts.settings, override);
  const maxResetSeconds = opts.maxResetSeconds ?? DEFAULT_MAX_RESET_SECONDS;
  const fingerprint = credentialFingerprint(opts.keyring, tenantId, provider, credentials);
  let ensured = false;
  return {
    async acquire(signal) {
      if (!ensured) {
        await ensureBudget(pool, { fingerprint, provider, tenantId, connectionId: opts.connectionId ?? null });
        ensured = true;
      }
      for (let freed = 0; ; ) {
        if (await spendBudget(pool, fingerprint, limits.reserve, limits.ceiling)) {
          metrics.connectorRequests.inc({ provider });
          return;
        }
        const wait = await findBudgetWait(pool, fingerprint, limits.reserve, limits.ceiling);
        const until = wait.heldUntil ?? wait.reserveUntil ?? wait.ceilingUntil;
        if (until === null) {
          // Freed meanwhile (a reset passed, a window ended): try again, without spinning. The two
          // statements read one condition, so this happens once or twice; never more than
          // MAX_FREED_RETRIES in a row (then the request waits as for a short ceiling).
          if (++freed > MAX_FREED_RETRIES) throw new RateLimited(`${provider} connector: the credential's shared rate budget refused a request without saying until when; trying again shortly`, 1);
          await sleep(20, signal);
          continue;
        }
        const ms = until.getTime() - wait.now.getTime();
        const reason: BudgetWaitReason = wait.heldUntil ? 'retry_after' : wait.reserveUntil ? 'reserve' : 'ceiling';
        metrics.connectorBudgetWaits.inc({ provider, reason });
        if (reason === 'ceiling' && ms <= IN_PLACE_WAIT_MS) {
          await sleep(Math.max(ms, 1), signal);
          continue;
        }
        const capped = wait.cappedFrom
          ? ` (the provider stated a reset at ${wait.cappedFrom.toISOString()}, more than RATE_BUDGET_MAX_RESET_SECONDS = ${maxResetSeconds} s away: capped)`
          : '';
        throw new RateLimited(
          reason === 'retry_after'
            ? `${provider} connector: the provider asked to wait (rate limited, with Retry-After) until ${until.toISOString()}; every request of the credential waits for it`
            : reason === 'reserve'
            ? `${provider} connector: the credential's shared rate budget is down to its reserve (${wait.remaining} left of ${limits.reserve} kept); waiting for the provider's reset at ${until.toISOString()}${capped}`
            : `${provider} connector: the credential's request ceiling (${limits.ceiling?.requests} per ${limits.ceiling?.seconds} s) is reached; waiting until ${until.toISOString()}`,
          Math.max(1, Math.ceil(ms / 1000)),
        );
      }
    },
    async report(answer) {
      const remaining = await reportBudget(pool, fingerprint, storableAnswer(answer), maxResetSeconds);
      if (remaining !== null) metrics.connectorBudgetRemaining.set({ provider }, remaining);
    },
  };
}
