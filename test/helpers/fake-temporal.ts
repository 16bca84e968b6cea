// A Temporal client stand-in for tests that need a workflow NOT to be running (which a real server
// gives only after killing it): `running` lists the running workflow ids; starts are recorded.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';

/** A fake client: describe, cancel and signal find only the ids of `running`; starts add to it and to `started`. */
export function fakeTemporal(running: Set<string> = new Set()): { client: Client; started: string[]; running: Set<string> } {
  const started: string[] = [];
  const client = {
    workflow: {
      async *list() {
        for (const id of running) yield { workflowId: id };
      },
      getHandle(workflowId: string) {
        const missing = () => new WorkflowNotFoundError('not found', workflowId, undefined);
        return {
          async describe() {
            if (!running.has(workflowId)) throw missing();
            return { status: { name: 'RUNNING' } };
          },
          async cancel() {
            if (!running.has(workflowId)) throw missing();
          },
          async signal() {
            if (!running.has(workflowId)) throw missing();
          },
        };
      },
      async start(_type: unknown, opts: { workflowId: string }) {
        started.push(opts.workflowId);
        running.add(opts.workflowId);
        return { workflowId: opts.workflowId };
      },
      async signalWithStart(_type: unknown, opts: { workflowId: string }) {
        if (!running.has(opts.workflowId)) started.push(opts.workflowId);
        running.add(opts.workflowId);
        return { workflowId: opts.workflowId };
      },
    },
  };
  return { client: client as unknown as Client, started, running };
}
