// Bench-only workflow (never part of the Synctide worker) for bench/cycles-per-run.bench.ts: a
// bare cycle with the connection workflow's shape (two local activities to plan, a durable sleep,
// one local activity to claim, the job's activity, one local activity to record), repeated
// `cyclesPerRun` times before the run continues as new. No database, no connector.
import { continueAsNew, proxyActivities, proxyLocalActivities, sleep } from '@temporalio/workflow';

/** The bench worker's activities: `job` counts cycles, `step` stands for a bookkeeping step. */
export interface CycleShapeActivities {
  job(): Promise<void>;
  step(): Promise<void>;
}

const { job } = proxyActivities<CycleShapeActivities>({ startToCloseTimeout: '1 minute' });
const { step } = proxyLocalActivities<CycleShapeActivities>({ startToCloseTimeout: '1 minute' });

/** `cyclesPerRun` cycles of `intervalMs` each, then continue-as-new with the same arguments. */
export async function cycleShapeWorkflow(intervalMs: number, cyclesPerRun: number): Promise<void> {
  for (let i = 0; i < cyclesPerRun; i++) {
    await step();
    await step();
    await sleep(intervalMs);
    await step();
    await job();
    await step();
  }
  await continueAsNew<typeof cycleShapeWorkflow>(intervalMs, cyclesPerRun);
}
