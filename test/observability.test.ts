// Observability as files: the metric names follow Prometheus' conventions (one label name for the
// provider, units in seconds, no type in a name), the API counts requests by route template, the
// breaker, webhook-backlog and schedule gauges are read from the database (the same on every
// process), every query of the Grafana dashboard and the alert rules names a metric the code
// registers, and the alert rules, fed to promtool (Debian's `prometheus` package, as .ci/run
// installs it) with series scraped from the code's own registries, fire and stop when they should.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { reconcileConnections } from '../activities/reconcile-connections';
import { createApp } from '../api/app';
import { connectorSlugs } from '../connectors/registry';
import { SDK_METRICS_READ } from '../infra/sdk-runtime';
import { createMetricsRegistry, createSyncMetrics, httpMetrics, recordJobEnded, registerQueueDepthGauge, registerStateGauges, registerTickIntervalGauge, type StateCounts } from '../lib/metrics';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { promtoolTest, sampleIn } from './helpers/prometheus';
import { TEST_KEYRING, testActivityDeps } from './helpers/deps';
import { capturingLogger } from './helpers/logs';
import { createTimeSkippingEnv } from './helpers/temporal';
import { databaseStateCounts } from '../infra/boot';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const KEY = 'c8e1f04a9b7d46e3a5f2d0c9b8e7a615c8e1f04a9b7d46e3';

const stateCountsOf = databaseStateCounts;
/** State gauges that read nothing. */
const NO_STATE: StateCounts = { openBreakers: async () => new Map(), webhookBacklog: async () => ({ pending: 0, oldestSeconds: 0 }), scheduleCounts: async () => null, deselectionBacklog: async () => ({ pending: 0, oldestSeconds: 0 }) };

let db: TestDatabase;
let env: TestWorkflowEnvironment;
beforeAll(async () => {
  [db, env] = await Promise.all([createTestDatabase(), createTimeSkippingEnv()]);
});
afterAll(async () => {
  await env?.teardown();
  await db?.drop();
});

/** promtool input values, one a minute: `value(minute)` for minutes [from, to), `_` (no sample) where it is undefined. */
const minutes = (from: number, to: number, value: (minute: number) => number | undefined) =>
  Array.from({ length: to - from }, (_, k) => {
    const v = value(from + k);
    return v === undefined ? '_' : String(v);
  });

/** The value of one sample of `name` whose labels include `labels`, or undefined. */
async function sample(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return undefined;
  const { values } = await metric.get();
  return values.find((v) => (v as { metricName?: string }).metricName === name || !(v as { metricName?: string }).metricName ? Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want) : false)?.value;
}

describe('metric names', () => {
  it('label the provider `provider` everywhere, put no type in a name and measure time in seconds', async () => {
    const registry = new Registry();
    const metrics = createSyncMetrics(registry);
    registerStateGauges(registry, NO_STATE);
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
    expect(names).toContain('sync_scheduler_backlog');
    expect(names).toContain('sync_scheduler_tick_duration_seconds');
    for (const metric of await registry.getMetricsAsJSON()) {
      expect(metric.name, metric.name).not.toMatch(/_(gauge|counter|histogram|summary)$|_ms$|_milliseconds/);
    }
    // Every metric with a provider dimension names it `provider`.
    metrics.jobs.inc({ status: 'queued', provider: 'github' });
    metrics.jobRetries.inc({ provider: 'github' });
    metrics.jobsScheduled.inc({ provider: 'github', tenant_id: 'acme' });
    const text = await registry.metrics();
    expect(text).not.toMatch(/connector_id=|provider_slug=/);
    expect(text).toMatch(/^sync_jobs_total\{status="queued",provider="github"\} 1$/m);
    expect(text).toMatch(/^sync_job_retries_total\{provider="github"\} 1$/m);
  });
});

describe('API request metrics', () => {
  it('count answers by method, route template and status, and time them in seconds', async () => {
    const registry = new Registry();
    const api = createApp({
      pool: db.pool, temporal: env.client, registry, metrics: createSyncMetrics(registry), logger: capturingLogger().logger,
      credentials: TEST_KEYRING, taskQueue: 'observability', adminApiKey: KEY, maxIntervalSeconds: 86_400, immediateSyncTimeoutMs: 60_000,
    });
    const auth = { headers: { authorization: `Bearer ${KEY}` } };
    const ids = ['0b5e2c7e-4a56-4f7e-9d0b-5d7c3c1f2a10', '1c6f3d8f-5b67-4a8f-8e1c-6e8d4d2a3b21'];
    for (const id of ids) expect((await api.request(`/connections/${id}`, auth)).status).toBe(404);
    expect((await api.request(`/connections/${ids[0]}`)).status).toBe(401);
    expect((await api.request('/no/such/route', auth)).status).toBe(404);
    expect((await api.request('/healthz')).status).toBe(200);

    const count = (labels: Record<string, string>) => sample(registry, 'http_requests_total', labels);
    expect(await count({ method: 'GET', route: '/connections/:id', status: '404' })).toBe(2);
    expect(await count({ method: 'GET', route: '/connections/:id', status: '401' })).toBe(1);
    expect(await count({ method: 'GET', route: 'unmatched', status: '404' })).toBe(1);
    expect(await count({ method: 'GET', route: '/healthz', status: '200' })).toBe(1);
    const text = await registry.metrics();
    // No path with an id becomes a label value.
    for (const id of ids) expect(text).not.toContain(id);
    expect(text).toMatch(/^http_request_duration_seconds_count\{method="GET",route="\/connections\/:id",status="404"\} 2$/m);
    expect(text).toMatch(/^http_request_duration_seconds_bucket\{le="0\.005",method="GET",route="\/healthz",status="200"\} \d$/m);
  });

  it('reuse the metrics when a second app is built on the same registry', () => {
    const registry = new Registry();
    const deps = {
      pool: db.pool, temporal: env.client, registry, metrics: createSyncMetrics(registry), logger: capturingLogger().logger,
      credentials: TEST_KEYRING, taskQueue: 'observability', adminApiKey: KEY, maxIntervalSeconds: 86_400, immediateSyncTimeoutMs: 60_000,
    };
    createApp(deps);
    expect(() => createApp(deps)).not.toThrow();
  });
});

describe('state gauges', () => {
  it('count open breakers by provider and the pending webhook deliveries, read from the database', async () => {
    const registry = new Registry();
    registerStateGauges(registry, stateCountsOf(db.pool), 0);
    expect(await sample(registry, 'webhook_deliveries_pending')).toBe(0);
    expect(await sample(registry, 'webhook_deliveries_oldest_pending_seconds')).toBe(0);

    const connection = async (app: string) =>
      (await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key) values ('acme', 'github', $1) returning id`, [app])).rows[0]!.id;
    const [open, closed] = [await connection('open'), await connection('closed')];
    await db.pool.query(
      `insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures, paused_until)
       values ($1, 'github', 5, now() + interval '30 minutes'), ($2, 'github', 5, now() - interval '1 minute')`,
      [open, closed],
    );
    const { rows: hook } = await db.pool.query<{ id: string }>(
      `insert into webhooks (tenant_id, url, event_types, secret) values ('acme', 'http://127.0.0.1:9/', '{connection.disabled}', 'whsec_x') returning id`,
    );
    for (const [status, age] of [['pending', '10 minutes'], ['pending', '1 minute'], ['delivered', '1 hour']] as const) {
      const { rows: event } = await db.pool.query<{ id: string }>(
        `insert into webhook_events (tenant_id, event_type, payload) values ('acme', 'connection.disabled', '{}') returning id`,
      );
      await db.pool.query(`insert into webhook_deliveries (webhook_id, event_id, status, created_at) values ($1, $2, $3, now() - $4::interval)`, [hook[0]!.id, event[0]!.id, status, age]);
    }

    expect(await sample(registry, 'sync_breakers_open', { provider: 'github' })).toBe(1);
    expect(await sample(registry, 'webhook_deliveries_pending')).toBe(2);
    const oldest = (await sample(registry, 'webhook_deliveries_oldest_pending_seconds'))!;
    expect(oldest).toBeGreaterThanOrEqual(600);
    expect(oldest).toBeLessThan(3600);
  });

  it('count the deselections config changes left to the reconcile tick, and the age of the oldest, in one scrape', async () => {
    const registry = new Registry();
    registerStateGauges(registry, stateCountsOf(db.pool), 0);
    expect(sampleIn(await registry.metrics(), 'synctide_deselections_pending')).toBe(0);
    const { rows } = await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key) values ('acme', 'github', 'deselected') returning id`);
    await db.pool.query(
      `insert into pending_deselections (connection_id, resource_type, id_prefix, created_at)
       values ($1, 'issues', 'o/a#', now() - interval '20 minutes'), ($1, 'pulls', '', now() - interval '1 minute')`,
      [rows[0]!.id],
    );
    const text = await registry.metrics();
    expect(sampleIn(text, 'synctide_deselections_pending')).toBe(2);
    expect(sampleIn(text, 'synctide_deselections_oldest_pending_seconds')).toBeGreaterThanOrEqual(1200);
    expect(sampleIn(text, 'synctide_deselections_oldest_pending_seconds')).toBeLessThan(3600);
  });

  it('serve the oldest pending webhook delivery of the same count as webhook_deliveries_pending, in one scrape', async () => {
    const registry = new Registry();
    // Ten minutes old, two pending: what findWebhookBacklog answers (a database round trip).
    let reads = 0;
    const backlog = async () => {
      reads += 1;
      await new Promise((resolve) => setTimeout(resolve, 5));
      return { pending: 2, oldestSeconds: 600 };
    };
    registerStateGauges(registry, { ...NO_STATE, webhookBacklog: backlog }, 0);
    const text = await registry.metrics();
    expect(sampleIn(text, 'webhook_deliveries_pending')).toBe(2);
    expect(sampleIn(text, 'webhook_deliveries_oldest_pending_seconds')).toBe(600);
    // Both gauges from one statement.
    expect(reads).toBe(1);
  });
});

/** Every metric name a PromQL expression reads (label matchers, groupings, ranges and strings left out). */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
  const keywords = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan']);
  return [...bare.matchAll(/(?<![\w$.])([a-zA-Z_:][\w:]*)(?![\w:]|\s*\()/g)].map((m) => m[1]!).filter((name) => !keywords.has(name.toLowerCase()));
}

describe('dashboard and alert rules', () => {
  /** The names a scrape of an API or worker process can serve, read from a registry built as boot.ts and createApp build it. */
  async function servedNames(): Promise<Set<string>> {
    const registry = createMetricsRegistry();
    createSyncMetrics(registry);
    registerQueueDepthGauge(registry, async () => new Map());
    registerStateGauges(registry, NO_STATE);
    registerTickIntervalGauge(registry, 60);
    httpMetrics(registry);
    const names = new Set<string>();
    for (const metric of await registry.getMetricsAsJSON()) {
      names.add(metric.name);
      if (String(metric.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(metric.name + suffix);
    }
    // The Temporal SDK's own (checked in a real scrape by the npm start fault test).
    for (const name of SDK_METRICS_READ) for (const suffix of ['', '_bucket', '_sum', '_count']) names.add(name + suffix);
    return names;
  }

  it('metricNames finds the metrics of an expression and nothing else', () => {
    expect(metricNames('histogram_quantile(0.95, sum by (le, route) (rate(http_request_duration_seconds_bucket{status=~"5.."}[$__rate_interval])))')).toEqual([
      'http_request_duration_seconds_bucket',
    ]);
    expect(metricNames('sum(rate(a_total[5m])) / sum(rate(b_total{x="y z"}[5m])) > 0.05')).toEqual(['a_total', 'b_total']);
  });

  it('every query of the Grafana dashboard names a metric the code registers', async () => {
    const served = await servedNames();
    const dashboard = JSON.parse(readFileSync(path.join(ROOT, 'deploy/grafana/synctide.json'), 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
    expect(exprs.length).toBeGreaterThan(20);
    for (const { panel, expr } of exprs) {
      const names = metricNames(expr);
      expect(names.length, `${panel}: ${expr}`).toBeGreaterThan(0);
      for (const name of names) expect(served.has(name), `${panel}: ${name} is registered nowhere`).toBe(true);
    }
    // The dashboard shows each area the operator guide names.
    const read = new Set(exprs.flatMap((e) => metricNames(e.expr)));
    for (const name of ['sync_scheduler_backlog', 'sync_jobs_total', 'sync_breakers_open', 'connector_budget_remaining', 'webhook_deliveries_pending', 'http_request_duration_seconds_bucket', 'temporal_workflow_task_schedule_to_start_latency_bucket']) {
      expect(read.has(name), name).toBe(true);
    }
  });

  it('every alert rule names a metric the code registers', async () => {
    const served = await servedNames();
    const rules = parse(readFileSync(path.join(ROOT, 'deploy/prometheus/rules.yml'), 'utf8')) as { groups: { rules: { alert: string; expr: string }[] }[] };
    const all = rules.groups.flatMap((g) => g.rules);
    expect(all.map((r) => r.alert)).toEqual(expect.arrayContaining([
      'SynctideConnectionsOverdue', 'SynctideJobsFailing', 'SynctideBreakerOpen', 'SynctideRateBudgetExhausted', 'SynctideWebhookBacklog', 'SynctideTemporalScheduleToStartHigh',
    ]));
    for (const rule of all) {
      for (const name of metricNames(rule.expr)) expect(served.has(name), `${rule.alert}: ${name} is registered nowhere`).toBe(true);
    }
  });
});

describe('deploy/prometheus/rules.yml against what the processes really export', () => {
  it('SynctideJobsFailing fires for the first job a (restarted) process counts as failed', async () => {
    // A worker process as boot.ts makes it (its entry point passes the registered providers); a
    // job of `github` fails at minute 5.
    const registry = createMetricsRegistry({ process: 'worker' });
    const metrics = createSyncMetrics(registry, connectorSlugs());
    const before = sampleIn(await registry.metrics(), 'sync_jobs_total', { status: 'failed', provider: 'github' });
    recordJobEnded(metrics, { status: 'failed', provider: 'github', began_at: new Date(0), finished_at: new Date(60_000) });
    const after = sampleIn(await registry.metrics(), 'sync_jobs_total', { status: 'failed', provider: 'github' });
    expect(after).toBe((before ?? 0) + 1);

    const values = [...minutes(0, 5, () => before), ...minutes(5, 30, () => after)].join(' ');
    const result = await promtoolTest([
      {
        name: 'first failure of a process',
        interval: '1m',
        input_series: [{ series: 'sync_jobs_total{status="failed",provider="github",process="worker",instance="w1"}', values }],
        alert_rule_test: [
          {
            eval_time: '10m',
            alertname: 'SynctideJobsFailing',
            exp_alerts: [
              {
                exp_labels: { severity: 'warning', provider: 'github' },
                exp_annotations: {
                  summary: 'github sync jobs failed in the last 15 minutes',
                  description: 'See the open sync_job_failed rows of the alerts table and GET /jobs?status=failed.',
                },
              },
            ],
          },
        ],
      },
    ]);
    expect(result.output).not.toMatch(/FAILED/);
    expect(result.status).toBe(0);
  });

  describe('the reconcile tick\'s gauges', () => {
    let own: TestDatabase;
    beforeAll(async () => {
      own = await createTestDatabase();
    });
    afterAll(async () => {
      await own?.drop();
    });

    it('are the latest tick\'s counts in every process, whichever worker ran it: SynctideConnectionsOverdue and SynctideDataStale fire, then stop once the backlog is gone', async () => {
      // Three active github connections whose next run was due 10 minutes ago; two of them were
      // created an hour ago and never synced (stale under the default 900 s interval).
      const now = Date.now();
      for (const [app, createdAt] of [['a', now - 3_600_000], ['b', now - 3_600_000], ['c', now]] as const) {
        await own.pool.query(
          `insert into connections (tenant_id, provider_slug, app_key, metadata, created_at)
           values ('acme', 'github', $1, jsonb_build_object('sync', jsonb_build_object('next_run_at', $2::text)), $3)`,
          [app, new Date(now - 600_000).toISOString(), new Date(createdAt)],
        );
      }
      // Two workers and an API, each with its registry as boot.ts builds it.
      const instances = { w1: 'worker', w2: 'worker', a1: 'api' } as const;
      const processes = Object.fromEntries(
        Object.entries(instances).map(([instance, name]) => {
          const registry = createMetricsRegistry({ process: name });
          registerStateGauges(registry, stateCountsOf(own.pool), 0);
          return [instance, { registry, metrics: createSyncMetrics(registry, connectorSlugs()) }];
        }),
      );
      /** The real reconcile tick, run by the activity worker of `instance`. */
      const tickOn = async (instance: string) => {
        const { deps } = testActivityDeps({ pool: own.pool, temporal: env.client, taskQueue: 'observability-ticks' });
        await reconcileConnections({ ...deps, metrics: processes[instance]!.metrics })({ at: Date.now() });
      };
      const scrapeAll = async () => Object.fromEntries(await Promise.all(Object.entries(processes).map(async ([i, p]) => [i, await p.registry.metrics()] as const)));

      await tickOn('w1');
      const overdue = await scrapeAll();
      for (const [instance, text] of Object.entries(overdue)) {
        expect(sampleIn(text, 'sync_scheduler_backlog'), instance).toBe(3);
        expect(sampleIn(text, 'synctide_stale_connections', { provider: 'github' }), instance).toBe(2);
      }
      // Every connection synced: its next run is ahead and its last success just now. The next
      // tick runs on the other worker.
      await own.pool.query(`update connections set metadata = jsonb_build_object('sync', jsonb_build_object('next_run_at', $1::text))`, [new Date(now + 600_000).toISOString()]);
      await own.pool.query(`insert into connection_schedule_runs (connection_id, last_success_at) select id, now() from connections`);
      await tickOn('w2');
      const healthy = await scrapeAll();
      for (const [instance, text] of Object.entries(healthy)) {
        expect(sampleIn(text, 'sync_scheduler_backlog'), instance).toBe(0);
        expect(sampleIn(text, 'synctide_stale_connections', { provider: 'github' }), instance).toBeUndefined();
      }

      // What Prometheus scrapes: the first scrapes for 20 minutes, then the second ones.
      const series = (name: string, labels: Record<string, string> = {}) =>
        Object.keys(processes).map((instance) => ({
          series: `${name}{${Object.entries({ ...labels, instance }).map(([k, v]) => `${k}="${v}"`).join(',')}}`,
          values: [...minutes(0, 20, () => sampleIn(overdue[instance]!, name, labels)), ...minutes(20, 50, () => sampleIn(healthy[instance]!, name, labels))].join(' '),
        }));
      const result = await promtoolTest([
        {
          name: 'the backlog is gone, counted by a tick on another worker',
          interval: '1m',
          input_series: [...series('sync_scheduler_backlog'), ...series('synctide_stale_connections', { provider: 'github' })],
          alert_rule_test: [
            {
              eval_time: '18m',
              alertname: 'SynctideConnectionsOverdue',
              exp_alerts: [
                {
                  exp_labels: { severity: 'warning' },
                  exp_annotations: {
                    summary: '3 connections are overdue for their scheduled sync',
                    description: 'sync_scheduler_backlog has been above 0 for 10 minutes: workers are missing, saturated or cannot reach Temporal.',
                  },
                },
              ],
            },
            {
              eval_time: '18m',
              alertname: 'SynctideDataStale',
              exp_alerts: [
                {
                  exp_labels: { severity: 'warning', provider: 'github' },
                  exp_annotations: {
                    summary: '2 github connections have stale data',
                    description: 'Their last successful sync is older than twice their interval (also details.stale_connections of /readyz).',
                  },
                },
              ],
            },
            { eval_time: '45m', alertname: 'SynctideConnectionsOverdue', exp_alerts: [] },
            { eval_time: '45m', alertname: 'SynctideDataStale', exp_alerts: [] },
          ],
        },
      ]);
      expect(result.output).not.toMatch(/FAILED/);
      expect(result.status).toBe(0);
    });
  });
});
