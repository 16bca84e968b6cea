// CPU of a workflow run's code: replays one recorded history (REPLAY_HISTORY, default the
// timer-driven connection cycle, test/histories/connection-cycle-continue-as-new.binpb)
// REPLAY_RUNS times (default 300) with the production bundle (dist/workflow-bundle.js, so run
// `npm run build` first), REPLAY_ROUNDS rounds (default 3), and prints the process's CPU per run.
// Every cycle of a connection is a new run, so this is the workflow thread's share of a cycle
// (the SDK replays in the calling thread). Not a `npm run bench` scenario: run it alone,
//   node --import tsx bench/replay-cost.ts
import fs from 'node:fs/promises';
import proto from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { benchFile } from './stack';

const { History } = proto.temporal.api.history.v1;
const file = process.env.REPLAY_HISTORY ?? benchFile('../test/histories/connection-cycle-continue-as-new.binpb');
const history = History.decode(await fs.readFile(file));
const runs = Number(process.env.REPLAY_RUNS ?? 300);
const rounds = Number(process.env.REPLAY_ROUNDS ?? 3);
const code = await fs.readFile(benchFile('../dist/workflow-bundle.js'), 'utf8');

for (let round = 1; round <= rounds; round++) {
  const histories = Array.from({ length: runs }, (_, i) => ({ workflowId: `replay-${i}`, history }));
  const before = process.cpuUsage();
  let failed = 0;
  for await (const result of Worker.runReplayHistories({ workflowBundle: { code } }, histories)) if (result.error) failed += 1;
  const cpu = process.cpuUsage(before);
  console.log(`round ${round}: ${((cpu.user + cpu.system) / 1000 / runs).toFixed(1)} ms of CPU a run (${runs} runs of ${file.split('/').pop()}, ${failed} failed)`);
}
