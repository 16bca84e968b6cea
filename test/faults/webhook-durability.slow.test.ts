// Fault: webhook deliveries pending in their retry backoff (the receiver answered 500 so far) live
// through a kill -9 of the `npm run worker` process and a stop and start of the persisted Temporal
// dev server (kept down while their 10 s retry timers come due). Once a new worker runs and the
// receiver accepts, every sync.completed event is delivered: none lost, none failed, none
// answered 2xx twice, and each delivery's attempts (500s before the faults, then one 200) recorded.
import { Client, Connection } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { webhookDeliveryWorkflowId } from '../../temporal/ids';
import { receiver as fakeReceiver } from '../helpers/fake-server';
import { countOf } from '../helpers/invariants';
import { apiEnv, callApi, createDemoConnection, startSynctide, workerEnv, type SynctideProcess } from '../helpers/processes';
import { usePersistedStack } from '../helpers/servers';
import { eventually } from '../helpers/worker';

const TASK_QUEUE = 'faults-webhook-durability';
const CONNECTIONS = 3;
// Each connection's first sync, then one full sync requested through the API.
const EVENTS = CONNECTIONS * 2;
// How long Temporal stays down: past the first 10 s retry of every delivery.
const TEMPORAL_DOWN_MS = 15_000;
const PRIVATE = { WEBHOOK_ALLOW_PRIVATE: 'true' };

/** A receiver on 127.0.0.1 answering 500 until `accepting` is set, then 200; it keeps every request. */
async function startReceiver() {
  const state = { accepting: false };
  const receiver = await fakeReceiver(() => (state.accepting ? 200 : 500));
  return { ...receiver, state };
}

interface Delivery {
  id: string;
  event_id: string;
  event_type: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  attempt_log: { attempt: number; status_code: number | null; error: string | null; at: string }[];
}

describe('worker kill -9 and Temporal restart during pending webhook deliveries', () => {
  const stack = usePersistedStack();

  it('delivers every pending delivery once the receiver accepts: none lost, none failed, none accepted twice', async () => {
    const { db, temporal } = stack;
    const servers = { databaseUrl: db.url, temporalAddress: temporal.address, taskQueue: TASK_QUEUE };
    const receiver = await startReceiver();
    try {
      const startWorker = async () => startSynctide('worker', await workerEnv(servers, PRIVATE));
      let worker: SynctideProcess = await startWorker();
      const api = await startSynctide('api', await apiEnv(servers, PRIVATE));

      // createDemoConnection makes tenant `acme` connections.
      const hook = await callApi(api, 'POST', '/webhooks', { tenant_id: 'acme', url: receiver.url, event_types: ['sync.completed'] });
      expect(hook.status, JSON.stringify(hook.body)).toBe(201);
      const webhookId: string = hook.body.id;
      const deliveries = async (): Promise<Delivery[]> => {
        const page = await callApi<{ items: Delivery[]; next_cursor: string | null }>(api, 'GET', `/webhooks/${webhookId}/deliveries?limit=100`);
        expect(page.status).toBe(200);
        expect(page.body.next_cursor).toBeNull();
        return page.body.items;
      };

      // Each connection's first sync runs at once; then a full sync of each through the API.
      const ids: string[] = [];
      for (let i = 0; i < CONNECTIONS; i++) {
        ids.push(await createDemoConnection(api, `hooked-${i}`, { records_per_resource: 5, page_size: 5, seed: `hooked-${i}` }));
      }
      const completedJobs = (n: number) =>
        eventually(async () => {
          const done = await countOf(db.pool, `sync_jobs where connection_id = any($1::uuid[]) and status = 'completed'`, [ids]);
          return done >= n ? done : undefined;
        }, { timeoutMs: 120_000 });
      await completedJobs(CONNECTIONS);
      for (const id of ids) {
        const sync = await callApi(api, 'POST', `/connections/${id}/sync`, { mode: 'full' });
        expect(sync.status, JSON.stringify(sync.body)).toBe(202);
      }
      await completedJobs(EVENTS);

      // Every delivery exists and was refused at least once: each waits in its retry backoff.
      const before = await eventually(async () => {
        const items = await deliveries();
        const refused = items.filter((d) => d.attempt_log.some((a) => a.status_code === 500));
        return items.length === EVENTS && refused.length === EVENTS ? items : undefined;
      }, { timeoutMs: 120_000, describe: async () => (await deliveries()).map((d) => [d.status, d.attempts]) });
      expect(before.every((d) => d.status === 'pending' && d.event_type === 'sync.completed')).toBe(true);
      expect(receiver.received.filter((r) => r.answered !== 500)).toEqual([]);

      // The faults: kill -9 the worker, stop Temporal, keep it down past the next retries, start it.
      const faultAt = Date.now();
      worker.kill('SIGKILL');
      const exit = await worker.exit;
      expect(exit.signal).toBe('SIGKILL');
      await temporal.stop();
      const downAt = Date.now();
      await new Promise((r) => setTimeout(r, TEMPORAL_DOWN_MS));
      const requestsWhileDown = receiver.received.filter((r) => r.at > downAt).length;
      await temporal.start();
      const restartedAt = Date.now();
      // Deliveries whose next retry (10 s after the first refusal, doubling) came due while Temporal was down.
      const dueWhileDown = before.filter((d) => {
        const last = Date.parse(d.attempt_log.at(-1)!.at);
        return last + 10_000 * 2 ** (d.attempts - 1) < restartedAt;
      }).length;
      worker = await startWorker();
      const pendingAtAccept = await countOf(db.pool, `webhook_deliveries where status = 'pending'`);
      receiver.state.accepting = true;
      const acceptedAt = Date.now();

      // Retries back off 10, 20, 40, 80 s: the next one of each delivery comes within ~2.5 minutes.
      const after = await eventually(async () => {
        const items = await deliveries();
        return items.length === EVENTS && items.every((d) => d.status === 'delivered') ? items : undefined;
      }, { timeoutMs: 240_000, describe: async () => (await deliveries()).map((d) => [d.status, d.attempts]) });
      const deliveredIn = Math.round((Date.now() - acceptedAt) / 1000);

      // Every delivery workflow ended with 'delivered' (so no attempt is still to come).
      const connection = await Connection.connect({ address: temporal.address });
      const outcomes: unknown[] = [];
      try {
        const client = new Client({ connection, namespace: 'default' });
        for (const d of after) outcomes.push(await client.workflow.getHandle(webhookDeliveryWorkflowId(d.id)).result());
      } finally {
        await connection.close();
      }

      const events = await countOf(db.pool, `webhook_events where event_type = 'sync.completed'`);
      const rows = await countOf(db.pool, 'webhook_deliveries');
      const failed = await countOf(db.pool, `webhook_deliveries where status = 'failed'`);
      const eventIds = new Set(after.map((d) => d.event_id));
      const accepted = new Map<string, number>();
      for (const r of receiver.received.filter((x) => x.answered >= 200 && x.answered < 300)) {
        const id = String(r.headers['synctide-event-id']);
        accepted.set(id, (accepted.get(id) ?? 0) + 1);
      }
      const refusedAfterRestart = receiver.received.filter((r) => r.at > faultAt && r.answered === 500).length;
      const attempts = after.map((d) => d.attempts).sort((a, b) => a - b);
      console.log(
        `[webhook-durability] ${EVENTS} sync.completed events (${CONNECTIONS} connections), ${rows} deliveries, all pending with ` +
          `${before.reduce((s, d) => s + d.attempts, 0)} refused attempts before the faults; worker killed (${exit.signal}), ` +
          `Temporal down ${TEMPORAL_DOWN_MS / 1000} s with ${dueWhileDown} retries coming due; receiver requests while down ${requestsWhileDown}; pending at accept ${pendingAtAccept}; ` +
          `refused after the faults ${refusedAfterRestart}; all delivered ${deliveredIn} s after accepting; ` +
          `attempts per delivery ${attempts.join('/')}; 2xx per event ${[...accepted.values()].join('/')}; failed ${failed}; ` +
          `receiver requests ${receiver.received.length}`,
      );

      // None lost: one delivery per event, all delivered, none failed, each workflow 'delivered'.
      expect(events).toBe(EVENTS);
      expect(rows).toBe(events);
      expect(eventIds.size).toBe(events);
      expect(pendingAtAccept).toBe(EVENTS);
      expect(failed).toBe(0);
      expect(outcomes).toEqual(after.map(() => 'delivered'));
      // Nothing reached the receiver while the worker was dead and Temporal down, though retries came due.
      expect(requestsWhileDown).toBe(0);
      expect(dueWhileDown).toBeGreaterThan(0);
      // Each event was answered 2xx exactly once, and nothing else was.
      expect([...accepted.keys()].sort()).toEqual([...eventIds].sort());
      for (const id of eventIds) expect(accepted.get(id)).toBe(1);
      // Each delivery's attempts are all recorded: 500s before the faults, then the one 200, and
      // every recorded attempt is a request the receiver saw.
      for (const d of after) {
        expect(d.attempts).toBeGreaterThanOrEqual(2);
        expect(d.attempt_log).toHaveLength(d.attempts);
        const codes = d.attempt_log.map((a) => a.status_code);
        expect(codes.at(-1)).toBe(200);
        expect(codes.slice(0, -1).every((c) => c === 500)).toBe(true);
        const seen = receiver.received.filter((r) => r.headers['synctide-delivery-id'] === d.id);
        expect(seen.every((r) => r.headers['synctide-event-id'] === d.event_id)).toBe(true);
        expect(new Set(seen.map((r) => r.body)).size).toBe(1);
        expect(seen.length).toBeGreaterThanOrEqual(d.attempts);
        expect(seen.at(-1)!.answered).toBe(200);
      }
    } finally {
      await receiver.close();
    }
  }, 330_000);
});
