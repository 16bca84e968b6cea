// The overdue and stale counts (sync_scheduler_backlog, synctide_stale_connections) are what the
// latest reconcile tick stored. While no tick ends (no worker runs, or the tick's workflow keeps
// failing) every process goes on serving that tick's counts, 0 as often as not, so
// SynctideConnectionsOverdue and SynctideDataStale stay quiet in the very outage in which every
// connection falls behind. Every process therefore serves when that tick counted
// (sync_scheduler_last_tick_timestamp_seconds) and the configured tick period
// (sync_scheduler_tick_interval_seconds), and SynctideReconcileTickStalled fires when the latest
// tick is older than three periods, and at least 15 minutes: a long SCHEDULER_TICK_SECONDS is
// not a stall.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeScheduleCounts } from '../db/models/connections';
import { databaseStateCounts } from '../infra/boot';
import { createMetricsRegistry, registerStateGauges, registerTickIntervalGauge } from '../lib/metrics';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { promtoolTest, samplesOf } from './helpers/prometheus';

const METRIC = 'sync_scheduler_last_tick_timestamp_seconds';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

describe('a reconcile tick that stops', () => {
  it('is seen: every process serves when the latest tick counted, and SynctideReconcileTickStalled fires once that is over 15 minutes old, never while ticks end', async () => {
    const registry = createMetricsRegistry({ process: 'api' });
    registerStateGauges(registry, databaseStateCounts(db.pool), 0);
    // Before any tick ended: 0, as long ago as can be (the alert takes the newest of all processes).
    expect(samplesOf(await registry.metrics(), METRIC)).toEqual([0]);

    // The last tick that ended, as the reconcile activity stores it: nothing overdue.
    const countedAt = new Date('2026-11-30T12:00:00.000Z');
    await storeScheduleCounts(db.pool, countedAt, 0, []);
    const text = await registry.metrics();
    expect(samplesOf(text, 'sync_scheduler_backlog')).toEqual([0]);
    expect(samplesOf(text, METRIC)).toEqual([countedAt.getTime() / 1000]);

    // Prometheus' view, on promtool's clock (0 at the start): ticks end every minute on one
    // stack; on the other the last one ended at minute 5 (its stored backlog stays 0).
    const result = await promtoolTest([
      {
        name: 'ticks stop at minute 5',
        interval: '1m',
        input_series: [
          { series: `${METRIC}{process="api",instance="a1",stack="stalled"}`, values: '0+60x5 300x40' },
          { series: `sync_scheduler_backlog{process="api",instance="a1",stack="stalled"}`, values: '0x45' },
        ],
        alert_rule_test: [
          { eval_time: '24m', alertname: 'SynctideReconcileTickStalled', exp_alerts: [] },
          { eval_time: '24m', alertname: 'SynctideConnectionsOverdue', exp_alerts: [] },
          {
            eval_time: '30m',
            alertname: 'SynctideReconcileTickStalled',
            exp_alerts: [
              {
                exp_labels: { severity: 'critical' },
                exp_annotations: {
                  summary: 'No reconcile tick has ended for 25m 0s',
                  description:
                    'sync_scheduler_backlog and synctide_stale_connections still show the counts of that tick, so SynctideConnectionsOverdue and SynctideDataStale cannot fire: no worker runs, or the reconcile workflow fails (see the workers\' logs and the reconcile workflow in Temporal).',
                },
              },
            ],
          },
        ],
      },
      {
        name: 'ticks end every minute',
        interval: '1m',
        input_series: [{ series: `${METRIC}{process="worker",instance="w1"}`, values: '0+60x45' }],
        alert_rule_test: [{ eval_time: '40m', alertname: 'SynctideReconcileTickStalled', exp_alerts: [] }],
      },
    ]);
    expect(result.output).not.toMatch(/FAILED/);
    expect(result.status).toBe(0);
  });

  it('follows the configured tick period: a tick of an hour that keeps ending never alerts, one that stops does after three periods', async () => {
    const INTERVAL = 'sync_scheduler_tick_interval_seconds';
    const result = await promtoolTest([
      {
        // SCHEDULER_TICK_SECONDS=3600: a tick ends every hour (at minutes 0, 60, 120, …), so the
        // latest one is up to an hour old between them; over 15 minutes, yet nothing is wrong.
        name: 'hourly ticks that keep ending',
        interval: '1m',
        input_series: [
          { series: `${METRIC}{process="worker",instance="w1"}`, values: Array.from({ length: 301 }, (_, m) => String(Math.floor(m / 60) * 3600)).join(' ') },
          { series: `${INTERVAL}{process="worker",instance="w1"}`, values: '3600x300' },
          { series: `${INTERVAL}{process="api",instance="a1"}`, values: '3600x300' },
        ],
        alert_rule_test: [
          { eval_time: '59m', alertname: 'SynctideReconcileTickStalled', exp_alerts: [] },
          { eval_time: '119m', alertname: 'SynctideReconcileTickStalled', exp_alerts: [] },
          { eval_time: '299m', alertname: 'SynctideReconcileTickStalled', exp_alerts: [] },
        ],
      },
      {
        // The same hourly tick, whose last one ended at minute 60: quiet while it is under three
        // periods (180 minutes) old, firing once it has been over that for 5 minutes.
        name: 'hourly ticks that stop after minute 60',
        interval: '1m',
        input_series: [
          { series: `${METRIC}{process="api",instance="a1"}`, values: `0x59 3600x240` },
          { series: `${INTERVAL}{process="api",instance="a1"}`, values: '3600x300' },
        ],
        alert_rule_test: [
          { eval_time: '200m', alertname: 'SynctideReconcileTickStalled', exp_alerts: [] },
          { eval_time: '244m', alertname: 'SynctideReconcileTickStalled', exp_alerts: [] },
          {
            eval_time: '250m',
            alertname: 'SynctideReconcileTickStalled',
            exp_alerts: [
              {
                exp_labels: { severity: 'critical' },
                exp_annotations: {
                  summary: 'No reconcile tick has ended for 3h 10m 0s',
                  description:
                    'sync_scheduler_backlog and synctide_stale_connections still show the counts of that tick, so SynctideConnectionsOverdue and SynctideDataStale cannot fire: no worker runs, or the reconcile workflow fails (see the workers\' logs and the reconcile workflow in Temporal).',
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

  it('serves the configured tick period as sync_scheduler_tick_interval_seconds', async () => {
    const registry = createMetricsRegistry({ process: 'worker' });
    registerTickIntervalGauge(registry, 3600);
    expect(samplesOf(await registry.metrics(), 'sync_scheduler_tick_interval_seconds')).toEqual([3600]);
  });
});
