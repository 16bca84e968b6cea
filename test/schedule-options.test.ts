// Schedule options on the time-skipping server with in-memory stub activities: periodic full
// syncs (`full_sync_every`, a count of runs or a duration) and cron time zones across DST changes
// (a daily 02:30 job in a zone that skips 02:30 runs once that day, not zero or two times).
import { describe, expect, it } from 'vitest';
import { DEFAULT_SCHEDULE_SETTINGS } from '../policy/schedule';
import { connectionWorkflowId } from '../temporal/ids';
import { patchIds, recordHistory } from './helpers/histories';
import { useStubLoop } from './helpers/stub-loop';

const TASK_QUEUE = 'schedule-options';
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** The local date and time of `ms` in `zone`, as `YYYY-MM-DD HH:MM`. */
function local(ms: number, zone: string): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-CA', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })
      .formatToParts(new Date(ms))
      .map((p) => [p.type, p.value]),
  );
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}`;
}

/** 00:00 UTC of the last Sunday of `month` (0-based) of the first year whose one is after `after`. */
function lastSundayAfter(month: number, after: number): number {
  for (let year = new Date(after).getUTCFullYear(); ; year++) {
    const last = new Date(Date.UTC(year, month + 1, 0));
    const sunday = Date.UTC(year, month, last.getUTCDate() - last.getUTCDay());
    if (sunday - 3 * DAY > after) return sunday;
  }
}

describe('schedule options (time-skipping, stub activities)', () => {
  const loop = useStubLoop(TASK_QUEUE);
  const { store, waitForState } = loop;
  const start = (sync: Record<string, unknown>, noJitter = false) =>
    loop.start(sync, noJitter ? { settings: { ...DEFAULT_SCHEDULE_SETTINGS, jitterPctMin: 0, jitterPctMax: 0 } } : {});
  const scheduledTypes = (id: string) => store.jobsOf(id).filter((j) => j.trigger === 'schedule' && j.status === 'completed').map((j) => j.jobType);

  it('full_sync_every: 3 makes every third scheduled run a full sync', async () => {
    const { id } = await start({ interval_seconds: 900, full_sync_every: 3 });
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await loop.env.sleep(120 * MINUTE);
    await waitForState(id, (s) => s.cycles >= 6 && s.phase === 'sleeping');
    expect(scheduledTypes(id).slice(0, 6)).toEqual(['incremental', 'incremental', 'full', 'incremental', 'incremental', 'full']);
    const firstFull = store.jobsOf(id).find((j) => j.jobType === 'full')!;
    await recordHistory(loop.env.client, 'connection-full-sync-every', connectionWorkflowId(id), firstFull.runId);
  });

  it('full_sync_every: "1h" runs a full sync once the last one is an hour old, less half the interval (the run nearest the hour)', async () => {
    const { id, connection } = await start({ interval_seconds: 900, full_sync_every: '1h' });
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await loop.env.sleep(190 * MINUTE);
    await waitForState(id, (s) => s.cycles >= 9 && s.phase === 'sleeping');
    const done = store.jobsOf(id).filter((j) => j.trigger === 'schedule' && j.status === 'completed');
    const fulls = done.filter((j) => j.jobType === 'full');
    expect(fulls.length).toBeGreaterThanOrEqual(2);
    // Each run is full exactly when the last full sync (or the connection's creation) is at least
    // 1 h old less half the 900 s interval at its scheduled time.
    let lastFull = connection.createdAt;
    for (const job of done) {
      expect(job.jobType).toBe(job.scheduledAt - lastFull >= HOUR - 450_000 ? 'full' : 'incremental');
      if (job.jobType === 'full') lastFull = job.finishedAt!;
    }
  });

  it('full_sync_every: "7d" on a weekly cron makes every weekly run full, whatever the jitter of that run or of the last full one', async () => {
    // Default jitter: up to 20 % of the week (1.4 days) after each Monday 03:00 slot, so the last
    // full sync, finished after its own jitter, is a little less than 7 days old at about half the
    // next slots' jittered times: still the run that falls on the duration.
    const { id } = await start({ cron: '0 3 * * 1', full_sync_every: '7d' });
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await loop.env.sleep(10 * 7 * DAY + 2 * DAY);
    await waitForState(id, (s) => s.cycles >= 11 && s.phase === 'sleeping');
    const types = scheduledTypes(id);
    const firstFull = types.indexOf('full');
    expect(firstFull, types.join(' ')).toBeGreaterThanOrEqual(0);
    expect(firstFull, types.join(' ')).toBeLessThanOrEqual(2);
    expect(types.slice(firstFull, firstFull + 9)).toEqual(Array(9).fill('full'));
    // A run full by the nearest-run rule only (its last full sync under 7 days old): its history has the marker.
    const fulls = store.jobsOf(id).filter((j) => j.trigger === 'schedule' && j.jobType === 'full');
    const nearest = fulls.find((j, i) => i > 0 && j.scheduledAt - fulls[i - 1]!.finishedAt! < 7 * DAY);
    expect(nearest, 'a weekly run full by the nearest-run rule only').toBeDefined();
    await recordHistory(loop.env.client, 'connection-full-sync-every-nearest-run', connectionWorkflowId(id), nearest!.runId);
  });

  it('an invalid full_sync_every is ignored: runs stay incremental', async () => {
    const { id } = await start({ interval_seconds: 900, full_sync_every: 'sometimes' });
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await loop.env.sleep(40 * MINUTE);
    await waitForState(id, (s) => s.cycles >= 3 && s.phase === 'sleeping');
    expect(new Set(scheduledTypes(id))).toEqual(new Set(['incremental']));
  });

  const ZONE = 'Europe/Berlin';

  it('a daily 02:30 cron in Europe/Berlin runs once on the day the clock skips 02:30 (at 03:00), once a day around it', async () => {
    const now = await loop.env.currentTimeMs();
    const springForward = lastSundayAfter(2, now); // 00:00 UTC of the change day
    await loop.env.sleep(springForward - 2 * DAY + 12 * HOUR - now);
    const { id } = await start({ cron: '30 2 * * *', timezone: ZONE }, true);
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await loop.env.sleep(3 * DAY + 6 * HOUR);
    await waitForState(id, (s) => s.cycles >= 4 && s.phase === 'sleeping');
    const runs = store.jobsOf(id).filter((j) => j.status === 'completed' && j.plan?.mode === 'normal').map((j) => local(j.scheduledAt, ZONE));
    const day = (offset: number) => local(springForward + offset * DAY + 12 * HOUR, ZONE).slice(0, 10);
    expect(runs.slice(0, 3)).toEqual([`${day(-1)} 02:30`, `${day(0)} 03:00`, `${day(1)} 02:30`]);
    expect(runs.filter((r) => r.startsWith(day(0)))).toHaveLength(1);
  });

  it('a cron listing 02:30 among its hours (30 2,14 * * *) runs it once on the day the clock skips it, at 03:00, as a single 02:30 does', async () => {
    const now = await loop.env.currentTimeMs();
    const springForward = lastSundayAfter(2, now);
    await loop.env.sleep(springForward - 2 * DAY + 12 * HOUR - now);
    const { id } = await start({ cron: '30 2,14 * * *', timezone: ZONE }, true);
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await loop.env.sleep(3 * DAY);
    await waitForState(id, (s) => s.cycles >= 6 && s.phase === 'sleeping');
    const jobs = store.jobsOf(id).filter((j) => j.status === 'completed' && j.plan?.mode === 'normal');
    const day = (offset: number) => local(springForward + offset * DAY + 12 * HOUR, ZONE).slice(0, 10);
    expect(jobs.map((j) => local(j.scheduledAt, ZONE)).filter((r) => r.startsWith(day(0)))).toEqual([`${day(0)} 03:00`, `${day(0)} 14:30`]);
    // The run that planned 03:00 (the rule before the patch skipped it to 14:30) has the marker.
    const jumped = jobs.find((j) => local(j.scheduledAt, ZONE) === `${day(0)} 03:00`)!;
    const events = (await loop.env.client.workflow.getHandle(connectionWorkflowId(id), jumped.runId).fetchHistory()).events ?? [];
    expect(patchIds(events)).toContain('cron-lists-fixed-times');
    await recordHistory(loop.env.client, 'connection-cron-lists-fixed-times', connectionWorkflowId(id), jumped.runId);
  });

  it('on the day 02:30 occurs twice (fall back) the same job runs once', async () => {
    const now = await loop.env.currentTimeMs();
    const fallBack = lastSundayAfter(9, now);
    await loop.env.sleep(fallBack - 2 * DAY + 12 * HOUR - now);
    const { id } = await start({ cron: '30 2 * * *', timezone: ZONE }, true);
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await loop.env.sleep(3 * DAY + 6 * HOUR);
    await waitForState(id, (s) => s.cycles >= 4 && s.phase === 'sleeping');
    const runs = store.jobsOf(id).filter((j) => j.status === 'completed' && j.plan?.mode === 'normal').map((j) => local(j.scheduledAt, ZONE));
    const day = (offset: number) => local(fallBack + offset * DAY + 12 * HOUR, ZONE).slice(0, 10);
    expect(runs.slice(0, 3)).toEqual([`${day(-1)} 02:30`, `${day(0)} 02:30`, `${day(1)} 02:30`]);
    expect(runs.filter((r) => r.startsWith(day(0)))).toHaveLength(1);
  });
});
