// The bookkeeping invariants fault tests check (one active job per kind, no slot run twice, no
// overlapping runs), read straight from Postgres.
import type { Pool } from '../../db/pool';
import { eventually } from './worker';

/** Statuses of a job that is still active. */
const ACTIVE = `('queued', 'running', 'retrying')`;

/** A connection (and, per type, job type) holding more than one active job at once. */
export interface DuplicateActive {
  connection_id: string;
  job_type?: string;
  n: number;
}

/**
 * Connections with more than one active job: across job types by default (a test where only the
 * scheduler makes jobs), or per job type with `perType` (an API full sync may run beside the
 * connection's queued incremental), where a job queued behind a running one of its type (a sync
 * asking for types the running one does not sync) is no duplicate: the partial unique indexes
 * allow one queued and one running or retrying job of each type.
 */
export async function activeDuplicates(pool: Pool, opts: { perType?: boolean } = {}): Promise<DuplicateActive[]> {
  const cols = opts.perType ? 'connection_id, job_type' : 'connection_id';
  const { rows } = await pool.query<DuplicateActive>(
    `select ${cols}, count(*)::int as n from sync_jobs where status in ${ACTIVE}
      group by ${cols}${opts.perType ? ", status = 'queued'" : ''} having count(*) > 1`,
  );
  return rows;
}

/**
 * Pairs of jobs of one connection (and job type, with `perType`) whose runs overlapped in time:
 * both claimed, and each claimed before the other finished. The unique index only stops two
 * *active rows*; this also catches a job marked finished while another of the connection ran.
 */
export async function overlappingRuns(pool: Pool, opts: { perType?: boolean } = {}): Promise<{ a: string; b: string }[]> {
  const { rows } = await pool.query<{ a: string; b: string }>(
    `select a.id as a, b.id as b from sync_jobs a
       join sync_jobs b on b.connection_id = a.connection_id and a.id < b.id ${opts.perType ? 'and b.job_type = a.job_type' : ''}
      where a.started_at is not null and b.started_at is not null
        and a.started_at < coalesce(b.finished_at, 'infinity') and b.started_at < coalesce(a.finished_at, 'infinity')`,
  );
  return rows;
}

/** A sampler of `activeDuplicates`, running until `stop()`. */
export interface ActiveJobWatch {
  /** Stops sampling; resolves with how many samples were taken and every violation seen. */
  stop(): Promise<{ samples: number; violations: DuplicateActive[] }>;
}

/** Samples `activeDuplicates` every `everyMs` while the test runs (a failed query is skipped: a fault may be on). */
export function watchActiveJobs(pool: Pool, opts: { perType?: boolean; everyMs?: number } = {}): ActiveJobWatch {
  let samples = 0;
  const violations: DuplicateActive[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        violations.push(...(await activeDuplicates(pool, opts)));
        samples += 1;
      } catch {
        // Postgres unreachable right now (the fault under test): try again.
      }
      await new Promise((r) => setTimeout(r, opts.everyMs ?? 250));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return { samples, violations };
    },
  };
}

/** Per connection: job counts by status, e.g. `{ completed: 2, queued: 1 }`. */
export async function jobStatusCounts(pool: Pool, connectionIds: string[]): Promise<Map<string, Record<string, number>>> {
  const { rows } = await pool.query<{ connection_id: string; status: string; n: number }>(
    `select connection_id, status, count(*)::int as n from sync_jobs where connection_id = any($1::uuid[]) group by 1, 2`,
    [connectionIds],
  );
  const counts = new Map<string, Record<string, number>>(connectionIds.map((id) => [id, {}]));
  for (const row of rows) counts.get(row.connection_id)![row.status] = row.n;
  return counts;
}

/** `{ "completed=2,queued=1": 5 }`: how many connections show each combination of counts. */
export function summariseCounts(counts: Map<string, Record<string, number>>): Record<string, number> {
  const summary: Record<string, number> = {};
  for (const byStatus of counts.values()) {
    const key = Object.keys(byStatus).sort().map((s) => `${s}=${byStatus[s]}`).join(',') || 'none';
    summary[key] = (summary[key] ?? 0) + 1;
  }
  return summary;
}

/** `select count(*)` of `sql` (a FROM clause with optional WHERE). */
export async function countOf(pool: Pool, sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(`select count(*)::int as n from ${sql}`, params);
  return rows[0]!.n;
}

/**
 * Waits until every connection's job counts by status are exactly `expected` (e.g. `{ completed:
 * 1, queued: 1 }`: its first sync ran and the next one waits), and returns them.
 */
export function untilEveryConnection(
  pool: Pool,
  connectionIds: string[],
  expected: Record<string, number>,
  timeoutMs: number,
): Promise<Map<string, Record<string, number>>> {
  const want = JSON.stringify(Object.keys(expected).sort().map((k) => [k, expected[k]]));
  return eventually(async () => {
    const counts = await jobStatusCounts(pool, connectionIds);
    const ok = [...counts.values()].every((c) => JSON.stringify(Object.keys(c).sort().map((k) => [k, c[k]])) === want);
    return ok ? counts : undefined;
  }, { timeoutMs, describe: async () => summariseCounts(await jobStatusCounts(pool, connectionIds)) });
}

/** Inserts `count` active demo connections syncing every `intervalSeconds`; returns their ids. */
export async function insertDemoConnections(
  pool: Pool,
  opts: { count: number; prefix: string; intervalSeconds: number; config?: Record<string, unknown> },
): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, config, metadata)
     select 'acme', 'demo', $2 || i, $3, $4 from generate_series(1, $1) i returning id`,
    [opts.count, opts.prefix, opts.config ?? {}, { sync: { interval_seconds: opts.intervalSeconds } }],
  );
  return rows.map((r) => r.id);
}
