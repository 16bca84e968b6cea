// Cycle cost: what one timer-driven cycle of a connection costs in Temporal's units, counted
// from the histories. N connections (BENCH_CONNECTIONS, default 20) at 60 s, jitter 0, demo data
// with one resource and one record, run by the real Synctide worker until each has completed its
// bootstrap job and BENCH_CYCLES (default 2) timer-driven jobs. A cycle is one run of the
// connection workflow whose job waited for its timer (run start → timer → job → continue-as-new):
// the job runs inside the run, or, in the older shape, as a child whose own workflow is added. Workflow tasks are WorkflowTaskCompleted events,
// activity tasks ActivityTaskScheduled events, local activities their markers.
import pMap from 'p-map';
import { ensureConnectionWorkflow, ensureReconcileWorkflow } from '../temporal/client';
import { connectionWorkflowId } from '../temporal/ids';
import { EventType, type HistoryEvent, NO_JITTER, runBench, sleep, startSynctideWorker, table } from './stack';

const N = Number(process.env.BENCH_CONNECTIONS ?? 20);
const CYCLES = Number(process.env.BENCH_CYCLES ?? 2);
const TASK_QUEUE = 'bench-cycle-cost';
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/** What one workflow run (or a cycle: a connection run and its job) cost. */
interface Cost {
  workflowTasks: number;
  activityTasks: number;
  localActivities: number;
}

function costOf(events: HistoryEvent[]): Cost {
  let workflowTasks = 0;
  let activityTasks = 0;
  let localActivities = 0;
  for (const e of events) {
    if (e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) workflowTasks += 1;
    else if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) activityTasks += 1;
    else if (e.eventType === EventType.EVENT_TYPE_MARKER_RECORDED && e.markerRecordedEventAttributes?.markerName === LOCAL_ACTIVITY_MARKER) {
      localActivities += 1;
    }
  }
  return { workflowTasks, activityTasks, localActivities };
}

await runBench('cycle-cost', `${N} connections at 60 s, jitter 0, ${CYCLES} timer-driven cycles each`, async (stack) => {
  const worker = await startSynctideWorker(stack, { taskQueue: TASK_QUEUE, settings: NO_JITTER });
  let stopped = false;
  try {
    await ensureReconcileWorkflow(stack.client, TASK_QUEUE, 60, 7);
    const { rows } = await stack.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config, metadata)
       select 'bench', 'demo', 'cost-' || i, '{"resource_types": ["items"], "records_per_resource": 1, "page_size": 1}', $1
         from generate_series(1, $2::int) as i returning id`,
      [{ sync: { interval_seconds: 60 } }, N],
    );
    const ids = rows.map((r) => r.id);
    await pMap(ids, (id) => ensureConnectionWorkflow(stack.client, TASK_QUEUE, { id, tenantId: 'bench', providerSlug: 'demo' }), { concurrency: 20 });
    const deadline = Date.now() + (CYCLES + 3) * 90_000;
    for (;;) {
      const { rows: done } = await stack.pool.query<{ n: number }>(
        `select count(*)::int as n from (select connection_id from sync_jobs where status = 'completed' group by 1 having count(*) >= $1) c`,
        [CYCLES + 1],
      );
      if (done[0]!.n >= N) break;
      if (Date.now() > deadline) throw new Error(`only ${done[0]!.n} of ${N} connections completed ${CYCLES + 1} jobs in time`);
      await sleep(2000);
    }
    await worker.stop();
    stopped = true;

    const cycles: Cost[] = [];
    const perConnection: (string | number)[][] = [];
    for (const id of ids) {
      const runs = [];
      for await (const info of stack.client.workflow.list({ query: `WorkflowId = '${connectionWorkflowId(id)}'` })) runs.push(info);
      let counted = 0;
      for (const run of runs) {
        const events = (await stack.client.workflow.getHandle(run.workflowId, run.runId).fetchHistory()).events ?? [];
        const timerFired = events.some((e) => e.eventType === EventType.EVENT_TYPE_TIMER_FIRED);
        const continued = events.some((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW);
        const child = events.find((e) => e.eventType === EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED);
        const childCompleted = events.some((e) => e.eventType === EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED);
        const inlineJobRan = !child && events.some((e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED);
        // The bootstrap run (no timer), the run still waiting, or a cycle whose job did not run.
        if (!timerFired || !continued || !(childCompleted || inlineJobRan)) continue;
        const parent = costOf(events);
        // A job run inline is part of the run's own history; a child job (older shape) has its own.
        const childId = child?.startChildWorkflowExecutionInitiatedEventAttributes!.workflowId;
        const job = childId ? costOf((await stack.client.workflow.getHandle(childId).fetchHistory()).events ?? []) : { workflowTasks: 0, activityTasks: 0, localActivities: 0 };
        cycles.push({
          workflowTasks: parent.workflowTasks + job.workflowTasks,
          activityTasks: parent.activityTasks + job.activityTasks,
          localActivities: parent.localActivities + job.localActivities,
        });
        counted += 1;
        if (perConnection.length < 3) {
          perConnection.push([id.slice(0, 8), `${parent.workflowTasks} + ${job.workflowTasks}`, `${parent.activityTasks} + ${job.activityTasks}`, `${parent.localActivities} + ${job.localActivities}`]);
        }
      }
      if (counted === 0) throw new Error(`connection ${id} has no completed timer-driven cycle`);
    }
    const mean = (k: keyof Cost) => cycles.reduce((s, c) => s + c[k], 0) / cycles.length;
    console.log(`timer-driven cycles counted: ${cycles.length} (${N} connections)`);
    console.log('first cycles, connection run + child job run (0 when the job ran inline):');
    table(['connection', 'workflow tasks', 'activity tasks', 'local activities'], perConnection);
    console.log('');
    console.log(`cycle-cost: ${mean('workflowTasks').toFixed(1)} workflow tasks, ${mean('activityTasks').toFixed(1)} activity tasks, ${mean('localActivities').toFixed(1)} local activities per cycle`);
  } finally {
    if (!stopped) await worker.stop();
  }
});
