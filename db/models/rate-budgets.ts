// SQL of `rate_budgets`: one row per provider credential (by fingerprint), shared by every worker.
// Each request takes one unit in a single statement, so concurrent workers never overspend.
import type { Queryable } from '../queryable';

/** Creates the budget row of a credential when it has none yet. */
export async function ensureBudget(db: Queryable, fingerprint: string, provider: string): Promise<void> {
  await db.query('insert into rate_budgets (fingerprint, provider) values ($1, $2) on conflict (fingerprint) do nothing', [fingerprint, provider]);
}

/**
 * Takes one request from the budget unless the provider's remaining count is down to `reserve`
 * before its reset, or the ceiling's window is full. A remaining count whose reset has passed is
 * forgotten (unknown until the provider states it again). Answers whether it was taken.
 */
export async function spendBudget(
  db: Queryable,
  fingerprint: string,
  reserve: number,
  ceiling: { requests: number; seconds: number } | null,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `update rate_budgets
        set remaining = case when reset_at is null or reset_at > now() then remaining - 1 end,
            reset_at = case when reset_at > now() then reset_at end,
            window_started_at = case when $3::int is null then window_started_at
                                     when now() >= window_started_at + make_interval(secs => $4) then now()
                                     else window_started_at end,
            window_count = case when $3::int is null then window_count
                                when now() >= window_started_at + make_interval(secs => $4) then 1
                                else window_count + 1 end,
            updated_at = now()
      where fingerprint = $1
        and not (remaining is not null and reset_at > now() and remaining <= $2)
        and ($3::int is null or now() >= window_started_at + make_interval(secs => $4) or window_count < $3)`,
    [fingerprint, reserve, ceiling?.requests ?? null, ceiling?.seconds ?? 1],
  );
  return (rowCount ?? 0) > 0;
}

/** Why a request must wait and until when, read with the database's clock. */
export interface BudgetWait {
  remaining: number | null;
  /** The provider's reset, when the remaining count is down to the reserve before it. */
  reserveUntil: Date | null;
  /** The end of the ceiling's window, when it is full. */
  ceilingUntil: Date | null;
  now: Date;
}

/** Why the budget of `fingerprint` refuses a request now (see spendBudget). */
export async function findBudgetWait(
  db: Queryable,
  fingerprint: string,
  reserve: number,
  ceiling: { requests: number; seconds: number } | null,
): Promise<BudgetWait> {
  const { rows } = await db.query<BudgetWait>(
    `select remaining,
            case when remaining is not null and reset_at > now() and remaining <= $2 then reset_at end as "reserveUntil",
            case when $3::int is not null and now() < window_started_at + make_interval(secs => $4) and window_count >= $3
                 then window_started_at + make_interval(secs => $4) end as "ceilingUntil",
            now() as now
       from rate_budgets where fingerprint = $1`,
    [fingerprint, reserve, ceiling?.requests ?? null, ceiling?.seconds ?? 1],
  );
  return rows[0] ?? { remaining: null, reserveUntil: null, ceilingUntil: null, now: new Date() };
}

/**
 * Records what the provider answered: a 304 gives its unit back (conditional requests cost
 * nothing); a stated remaining count replaces ours when it belongs to a later window (a reset more
 * than a second after ours), and otherwise lowers it (requests in flight were already taken).
 * Answers the remaining count now stored.
 */
export async function reportBudget(
  db: Queryable,
  fingerprint: string,
  answer: { status: number; remaining: number | null; resetAt: Date | null },
): Promise<number | null> {
  const { rows } = await db.query<{ remaining: number | null }>(
    `update rate_budgets
        set remaining = case
              when $3::int is null then remaining + (case when $2 = 304 then 1 else 0 end)
              when $4::timestamptz is not null and (reset_at is null or $4 > reset_at + interval '1 second') then $3
              else least(coalesce(remaining, $3) + (case when $2 = 304 then 1 else 0 end), $3) end,
            reset_at = case
              when $4::timestamptz is null then reset_at
              when reset_at is null or $4 > reset_at + interval '1 second' then $4
              else reset_at end,
            updated_at = now()
      where fingerprint = $1
      returning remaining`,
    [fingerprint, answer.status, answer.remaining, answer.resetAt],
  );
  return rows[0]?.remaining ?? null;
}
