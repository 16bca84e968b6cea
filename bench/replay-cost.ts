// Workflow-thread CPU and heap per replayed run, for bundle variants (scratch).
import fs from 'node:fs/promises';
import { Worker, bundleWorkflowCode, type WorkflowBundle } from '@temporalio/worker';
import proto from '@temporalio/proto';
import { WORKFLOWS_PATH, WORKFLOW_INTERCEPTOR_MODULES, withoutDependencySources } from '../infra/workflow-bundle';

const { History } = proto.temporal.api.history.v1;
const file = process.env.HIST ?? 'test/histories/connection-cycle-continue-as-new.binpb';
const history = History.decode(await fs.readFile(file));
const N = Number(process.env.N ?? 300);
const preload = (process.env.PRELOAD ?? '').split(',').filter(Boolean);
const noop = () => undefined;
const logger = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };
async function make(pre: string[]): Promise<WorkflowBundle> {
  const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES, logger, preloadModules: pre });
  return { code: withoutDependencySources(code) };
}
const variants: [string, WorkflowBundle][] = [['default', await make([])], ['preload', await make(preload)]];
for (let round = 0; round < 3; round++) {
  for (const [name, bundle] of variants) {
    const histories = Array.from({ length: N }, (_, i) => ({ workflowId: `wf-${i}`, history }));
    const t0 = process.cpuUsage();
    let errors = 0;
    for await (const r of Worker.runReplayHistories({ workflowBundle: bundle }, histories)) if (r.error) { errors++; if (errors < 3) console.log(String(r.error)); }
    const t = process.cpuUsage(t0);
    console.log(`${name} round ${round}: ${((t.user + t.system) / 1000 / N).toFixed(2)} ms CPU a run, errors ${errors}`);
  }
}
