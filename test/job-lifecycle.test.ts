// The job lifecycle as data: `validJobTransitions` (policy/job-lifecycle.ts) is the whole list of
// status changes a job may make, every statement that writes a job's status declares its change
// in `JOB_STATUS_CHANGES` (db/models/jobs.ts), and each declared statement, run against a real
// database from every status, changes exactly the jobs its declaration says, into what it says.
// No SQL of `db/` spells a vocabulary word itself: every one is interpolated from the vocabulary.
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PoolClient } from 'pg';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import * as jobs from '../db/models/jobs';
import { INITIAL_JOB_STATUS, isValidJobTransition, transitionJob, validJobTransitions } from '../policy/job-lifecycle';
import {
  ACTIVE_JOB_STATUSES,
  CONNECTION_STATUSES,
  DELIVERY_STATUSES,
  FINISHED_JOB_STATUSES,
  JOB_STATUSES,
  JOB_TRIGGERS,
  PURGE_STATUSES,
  RECORD_CHANGES,
  TASK_STATUSES,
  type JobStatus,
} from '../policy/vocabulary';
import { syncJobWorkflowId } from '../temporal/ids';
import { useTestDatabase } from './helpers/database';

const DB_DIR = join(__dirname, '..', 'db');

/** Every TypeScript file of `db/` (migrations are SQL history, not code). */
function dbSources(): { file: string; source: ts.SourceFile }[] {
  const files = [
    ...readdirSync(DB_DIR).filter((f) => f.endsWith('.ts')).map((f) => join(DB_DIR, f)),
    ...readdirSync(join(DB_DIR, 'models')).filter((f) => f.endsWith('.ts')).map((f) => join(DB_DIR, 'models', f)),
  ];
  return files.map((file) => ({ file, source: ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true) }));
}

/** Each node of `node`'s tree. */
function* walk(node: ts.Node): Generator<ts.Node> {
  yield node;
  for (const child of node.getChildren()) yield* walk(child);
}

/** The source text of every template literal in `node` (its `${…}` parts as written). */
function templates(node: ts.Node): string[] {
  return [...walk(node)].filter((n) => ts.isNoSubstitutionTemplateLiteral(n) || ts.isTemplateExpression(n)).map((n) => n.getText());
}

/** Whether `sql` updates `sync_jobs` setting its status. */
function setsJobStatus(sql: string): boolean {
  for (const match of sql.matchAll(/update\s+sync_jobs(?:\s+(?!set\b)\w+)?\s+set\s+([\s\S]*?)(?:\bwhere\b|$)/gi)) {
    if (/(^|[\s,])(\w+\.)?status\s*=/.test(match[1]!)) return true;
  }
  return false;
}

/** Exported functions of `db/` whose SQL writes a job's status, by how: `update` or `insert`. */
function jobStatusWriters(): { update: Map<string, string>; insert: Map<string, string> } {
  const update = new Map<string, string>();
  const insert = new Map<string, string>();
  for (const { source } of dbSources()) {
    for (const node of walk(source)) {
      if (!ts.isFunctionDeclaration(node) || !node.name) continue;
      const sql = templates(node);
      if (sql.some(setsJobStatus)) update.set(node.name.text, node.getText());
      if (sql.some((s) => /insert\s+into\s+sync_jobs\s*\([^)]*\bstatus\b/i.test(s))) insert.set(node.name.text, node.getText());
    }
  }
  return { update, insert };
}

describe('the job lifecycle table', () => {
  it('names every status, and a finished job goes nowhere', () => {
    expect(Object.keys(validJobTransitions).sort()).toEqual([...JOB_STATUSES].sort());
    for (const status of FINISHED_JOB_STATUSES) expect(validJobTransitions[status]).toEqual([]);
    for (const status of ACTIVE_JOB_STATUSES) {
      // Every active job can still end each way.
      for (const end of FINISHED_JOB_STATUSES) {
        const reachable = new Set<JobStatus>([status]);
        for (let i = 0; i < JOB_STATUSES.length; i++) for (const s of [...reachable]) validJobTransitions[s].forEach((t) => reachable.add(t));
        expect(reachable.has(end), `${status} → … → ${end}`).toBe(true);
      }
    }
    expect(INITIAL_JOB_STATUS).toBe(ACTIVE_JOB_STATUSES[0]);
  });

  it('transitionJob refuses a change the table does not list', () => {
    expect(() => transitionJob(['completed'], ['running'])).toThrow(/completed to running/);
    expect(() => transitionJob(['queued', 'running'], ['completed'])).toThrow(/queued to completed/);
    expect(() => transitionJob([], ['failed'])).toThrow(RangeError);
    expect(transitionJob(['running'], ['completed', 'failed'])).toEqual({ from: ['running'], to: ['completed', 'failed'] });
  });

  it('every declared change of db/models/jobs.ts is in the table', () => {
    for (const [name, change] of Object.entries(jobs.JOB_STATUS_CHANGES)) {
      for (const from of change.from) for (const to of change.to) expect(isValidJobTransition(from, to), `${name}: ${from} → ${to}`).toBe(true);
    }
  });
});

describe('the SQL of db/', () => {
  it('every statement that sets a job status is declared, and takes its words from its declaration', () => {
    const { update, insert } = jobStatusWriters();
    expect([...update.keys()].sort()).toEqual(Object.keys(jobs.JOB_STATUS_CHANGES).sort());
    for (const [name, text] of update) expect(text, name).toContain(`JOB_STATUS_CHANGES.${name}`);
    // A scheduled job (insertJob) and a requested one (insertRequestedJob, guarded by its connection's row).
    expect([...insert.keys()].sort()).toEqual(['insertJob', 'insertRequestedJob']);
    for (const [name, text] of insert) expect(text, name).toContain('INITIAL_JOB_STATUS');
  });

  it('spells no vocabulary word itself', () => {
    const words = new Set<string>([
      ...JOB_STATUSES, ...TASK_STATUSES, ...CONNECTION_STATUSES, ...DELIVERY_STATUSES, ...PURGE_STATUSES, ...RECORD_CHANGES, ...JOB_TRIGGERS,
    ]);
    const spelled: string[] = [];
    for (const { file, source } of dbSources()) {
      for (const node of walk(source)) {
        if (!ts.isTemplateLiteralToken(node) && !ts.isNoSubstitutionTemplateLiteral(node) && !ts.isStringLiteral(node)) continue;
        for (const match of node.getText().slice(1, -1).matchAll(/'([a-z_]+)'/g)) {
          if (words.has(match[1]!)) spelled.push(`${file.slice(DB_DIR.length + 1)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1} '${match[1]}'`);
        }
      }
    }
    expect(spelled).toEqual([]);
  });
});

describe('each declared statement, from every status (real Postgres)', () => {
  const db = useTestDatabase();

  const at = new Date('2030-01-01T00:00:00Z');
  /** Runs each declared statement on job `id` of connection `connectionId`. */
  const runs: Record<keyof typeof jobs.JOB_STATUS_CHANGES, (tx: PoolClient, id: string, connectionId: string) => Promise<unknown>> = {
    cancelActiveJob: (tx, id) => jobs.cancelActiveJob(tx, id, at, 'test'),
    markJobRunning: (tx, id) => jobs.markJobRunning(tx, id, at, `sync-job:${id}`),
    finishRunningJob: (tx, id) => jobs.finishRunningJob(tx, id, 'completed', at, null),
    // The test's connection is active: stopping it exercises both ends (a queued job cancelled, a begun one failed).
    endLeftSchedulerJobs: (tx, _id, connectionId) => jobs.endLeftSchedulerJobs(tx, connectionId, at, 'test', null, { active: 'test' }),
    markJobRetrying: (tx, id) => jobs.markJobRetrying(tx, id, at, 'test', 'failure'),
    failJobsWithNoOpenTask: (tx, id) => jobs.failJobsWithNoOpenTask(tx, [id], ['test'], at),
    failAbandonedJob: (tx, id) => jobs.failAbandonedJob(tx, id, at, 'test'),
  };

  /** The job's status and row version (xmin: the transaction that last wrote it). */
  async function observe(tx: PoolClient, id: string): Promise<{ status: JobStatus; version: string }> {
    const { rows } = await tx.query<{ status: JobStatus; version: string }>('select status, xmin::text as version from sync_jobs where id = $1', [id]);
    return rows[0]!;
  }

  for (const name of Object.keys(runs) as (keyof typeof runs)[]) {
    it(`${name} changes exactly the statuses it declares, into what it declares`, async () => {
      const change = jobs.JOB_STATUS_CHANGES[name];
      for (const from of JOB_STATUSES) {
        for (const outcome of name === 'finishRunningJob' ? (['completed', 'failed'] as const) : [null]) {
          const tx = await db.pool.connect();
          try {
            await tx.query('begin');
            const { rows } = await tx.query<{ id: string }>(
              `insert into connections (tenant_id, provider_slug, app_key, status) values ('t', 'github', $1, 'active') returning id`,
              [`app-${randomUUID()}`],
            );
            const connectionId = rows[0]!.id;
            const id = randomUUID();
            await jobs.insertJob(tx, { id, connectionId, tenantId: 't', jobType: 'incremental', trigger: 'schedule', scheduledAt: at, workflowId: syncJobWorkflowId(id) });
            await tx.query(`update sync_jobs set status = $2, finished_at = case when $2 in ('completed', 'failed', 'cancelled') then $3::timestamptz end where id = $1`, [id, from, at]);
            // The statement runs in a transaction of its own: a new xmin shows it wrote the row.
            await tx.query('commit');
            await tx.query('begin');
            const before = await observe(tx, id);
            if (outcome) await jobs.finishRunningJob(tx, id, outcome, at, null);
            else await runs[name](tx, id, connectionId);
            const after = await observe(tx, id);
            const written = after.version !== before.version;
            expect(written, `${name} from ${from}`).toBe(change.from.includes(from as never));
            if (written) {
              expect(change.to, `${name}: ${from} → ${after.status}`).toContain(after.status);
              expect(isValidJobTransition(from, after.status), `${name}: ${from} → ${after.status}`).toBe(true);
            }
            await tx.query('rollback');
          } finally {
            tx.release();
          }
        }
      }
    });
  }
});
