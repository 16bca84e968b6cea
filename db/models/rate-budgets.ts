// SQL of `rate_budgets`: one row per tenant and provider credential (by keyed fingerprint), shared
// by every worker, and of `rate_budget_connections`, which connections use each. Each request takes
// one unit in a single statement, so concurrent workers never overspend.
import { MAX_BUDGET_COUNT, type ProviderAnswer } from '../../policy/rate-budget';
import type { Queryable } from '../queryable';

/**
 * Creates the budget row of a tenant's credential when it has none yet, and records that
 * `connectionId` uses it (so a purge can delete the budgets no other connection uses).
 */
export async function ensureBudget(
  db: Queryable,
  budget: { fingerprint: string; provider: string; tenantId: string; connectionId: string | null },
): Promise<void> {
  await db.query(
    `with budget as (
       insert into rate_budgets (fingerprint, provider, tenant_id) values ($1, $2, $3) on conflict (fingerprint) do nothing
     )
     insert into rate_budget_connections (connection_id, fingerprint)
     select $4::uuid, $1 where $4::uuid is not null
     on conflict do nothing`,
    [budget.fingerprint, budget.provider, budget.tenantId, budget.connectionId],
  );
}

/**
 * Deletes the budgets connection `connectionId` used that no other connection uses (a purge, before
 * the connection row goes and its `rate_budget_connections` rows with it). Answers how many.
 * In a transaction: the budgets are locked first (in fingerprint order), so of two purges of
 * connections sharing one, the second waits for the first's commit and then, its delete reading
 * anew, finds the first's usage row gone and deletes the budget (both skipping it would leave it
 * for good).
 */
export async function deleteBudgetsOnlyOf(db: Queryable, connectionId: string): Promise<number> {
  await db.query(
    `select 1 from rate_budgets where fingerprint in (select fingerprint from rate_budget_connections where connection_id = $1)
      order by fingerprint for update`,
    [connectionId],
  );
  const { rowCount } = await db.query(
    `delete from rate_budgets b
      where b.fingerprint in (select fingerprint from rate_budget_connections where connection_id = $1)
        and not exists (select 1 from rate_budget_connections o where o.fingerprint = b.fingerprint and o.connection_id <> $1)`,
    [connectionId],
  );
  return rowCount ?? 0;
}

/**
 * SQL of whether the ceiling's window ($3 requests per $4 seconds, $4 being 1 or 60; no ceiling
 * when $3 is null) is full now: the one-second window for a per-second ceiling, the one-minute
 * window for a per-minute one. Both count every request of the credential.
 */
const WINDOW_FULL = `case when $3::int is null then false
                          when $4::int = 1 then now() < window_started_at + interval '1 second' and window_count >= $3
                          else now() < minute_window_started_at + interval '1 minute' and minute_window_count >= $3 end`;
/** SQL of when the window WINDOW_FULL checks ends. */
const WINDOW_END = `case when $4::int = 1 then window_started_at + interval '1 second' else minute_window_started_at + interval '1 minute' end`;

/** The ceiling's parameters ($3, $4) of a budget statement; a ceiling counts per second or per minute. */
function ceilingParams(ceiling: { requests: number; seconds: number } | null): [number | null, number] {
  if (ceiling && ceiling.seconds !== 1 && ceiling.seconds !== 60) throw new Error(`a request ceiling counts per 1 or 60 seconds, not ${ceiling.seconds}`);
  return [ceiling?.requests ?? null, ceiling?.seconds ?? 1];
}

/**
 * Takes one request from the budget unless the provider asked the credential to wait (`held_until`,
 * see reportBudget) and that time has not come, its remaining count is down to `reserve` before
 * its reset, or the ceiling's window is full. A remaining count whose reset has passed is
 * forgotten (unknown until the provider states it again), and one stated without a reset holds
 * nothing back: with no time to wait for, waiting would never end (the provider's own 429 then
 * says when), and the requests it lets go count it down to 0, never below. A request taken counts in both windows, whatever the caller's ceiling (connections
 * of one credential may have different ones, or none). The same conditions, in findBudgetWait,
 * say why and until when. Answers whether it was taken.
 */
export async function spendBudget(
  db: Queryable,
  fingerprint: string,
  reserve: number,
  ceiling: { requests: number; seconds: number } | null,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `update rate_budgets
        set remaining = case when reset_at is null or reset_at > now() then greatest(remaining - 1, 0) end,
            reset_at = case when reset_at > now() then reset_at end,
            window_started_at = case when now() >= window_started_at + interval '1 second' then now() else window_started_at end,
            window_count = case when now() >= window_started_at + interval '1 second' then 1 else window_count + 1 end,
            minute_window_started_at = case when now() >= minute_window_started_at + interval '1 minute' then now() else minute_window_started_at end,
            minute_window_count = case when now() >= minute_window_started_at + interval '1 minute' then 1 else minute_window_count + 1 end,
            updated_at = now()
      where fingerprint = $1
        and not coalesce(held_until > now(), false)
        and not coalesce(remaining <= $2 and reset_at > now(), false)
        and not (${WINDOW_FULL})`,
    [fingerprint, reserve, ...ceilingParams(ceiling)],
  );
  return (rowCount ?? 0) > 0;
}

/** Why a request must wait and until when, read with the database's clock. */
export interface BudgetWait {
  remaining: number | null;
  /** Until when the provider asked every request of the credential to wait (a 429 or 403 with Retry-After), when that is still ahead. */
  heldUntil: Date | null;
  /** The provider's reset, when the remaining count is down to the reserve before it. */
  reserveUntil: Date | null;
  /** The reset the provider stated when it lay beyond the cap (`reserveUntil` is then the cap), else null. */
  cappedFrom: Date | null;
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
            case when held_until > now() then held_until end as "heldUntil",
            case when coalesce(remaining <= $2 and reset_at > now(), false) then reset_at end as "reserveUntil",
            case when coalesce(remaining <= $2 and reset_at > now(), false) then reset_capped_from end as "cappedFrom",
            case when ${WINDOW_FULL} then ${WINDOW_END} end as "ceilingUntil",
            now() as now
       from rate_budgets where fingerprint = $1`,
    [fingerprint, reserve, ...ceilingParams(ceiling)],
  );
  return rows[0] ?? { remaining: null, heldUntil: null, reserveUntil: null, cappedFrom: null, ceilingUntil: null, now: new Date() };
}

/**
 * SQL of whether the answer's stated reset (`s.at`) belongs to a later window than the stored one:
 * none is stored, or it lies more than a second after the stored reset.
 */
const LATER_WINDOW = `(reset_at is null or s.at > reset_at + interval '1 second')`;
/**
 * SQL of whether the answer's stated reset belongs to an older window than the stored one: it lies
 * more than a second before the stored reset (a request sent before the provider's reset, answered
 * after one sent since).
 */
const OLDER_WINDOW = `(s.at < reset_at - interval '1 second')`;

/**
 * Records what the provider answered: a 304 gives its unit back (conditional requests cost
 * nothing); a stated remaining count replaces ours when it belongs to a later window (a reset more
 * than a second after ours), is ignored when it belongs to an older one (a reset more than a
 * second before ours: it says nothing of the current window, so it neither lowers the count nor
 * moves the reset back), and otherwise lowers it (requests in flight were already taken).
 * A stated reset more than `maxResetSeconds` away is taken as now + `maxResetSeconds` (and kept in
 * `reset_capped_from`): a provider, or a connection's `rate_limit` mapping, that names a reset
 * decades away cannot stop the credential's syncs for longer than that. A 304's unit given back
 * never lifts the count past MAX_BUDGET_COUNT (the column's integer). A wait the provider asked of
 * the credential (`holdSeconds`: a 429 or 403 with Retry-After) holds it until then on the
 * database's clock (`held_until`, never moved earlier by a shorter one; capped as a reset is),
 * whatever count it states. Answers the remaining count now stored.
 */
export async function reportBudget(
  db: Queryable,
  fingerprint: string,
  answer: ProviderAnswer,
  maxResetSeconds: number,
): Promise<number | null> {
  const { reset } = answer;
  const { rows } = await db.query<{ remaining: number | null }>(
    `with said as (
       -- A reset stated in seconds from now counts from the database's now(), as every time here.
       select coalesce($4::timestamptz, now() + make_interval(secs => $6::float8)) as at
     ), stated as (
       -- least() skips nulls: an unstated reset stays unstated.
       select case when said.at is not null then least(said.at, now() + make_interval(secs => $5)) end as at,
              case when said.at > now() + make_interval(secs => $5) then said.at end as capped_from
         from said
     )
     update rate_budgets
        set remaining = case
              -- A 304's unit given back in bigint, so a count at MAX_BUDGET_COUNT stays there.
              when $3::int is null then least(remaining::bigint + (case when $2 = 304 then 1 else 0 end), ${MAX_BUDGET_COUNT})
              when s.at is not null and ${LATER_WINDOW} then $3
              -- An older window's count: the current window's stays as it is.
              when s.at is not null and ${OLDER_WINDOW} then remaining
              else least(coalesce(remaining, $3)::bigint + (case when $2 = 304 then 1 else 0 end), $3) end,
            -- A reset moves forward to a later window's only, never back.
            reset_at = case when s.at is not null and ${LATER_WINDOW} then s.at else reset_at end,
            reset_capped_from = case when s.at is not null and ${LATER_WINDOW} then s.capped_from else reset_capped_from end,
            held_until = case when $7::float8 is null then held_until
                              else greatest(held_until, now() + make_interval(secs => least($7::float8, $5))) end,
            updated_at = now()
       from stated s
      where fingerprint = $1
      returning remaining`,
    [
      fingerprint, answer.status, answer.remaining, reset && 'at' in reset ? reset.at : null, maxResetSeconds, reset && 'inSeconds' in reset ? reset.inSeconds : null,
      answer.holdSeconds ?? null,
    ],
  );
  return rows[0]?.remaining ?? null;
}
