// Replays recorded histories of Synctide's workflows (test/histories/*.binpb) against the current
// workflow code: a change that would break running workflows (non-determinism) fails here.
// Record them again with the RECORD_HISTORIES command in docs/architecture.md ("Changing workflow code
// safely") when a change is meant to apply only to new runs (behind patched() or at a
// continue-as-new boundary), keeping the old files too.
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { loadHistories } from './helpers/histories';
import { synctideBundle } from './helpers/worker';

describe('replay of recorded workflow histories', () => {
  it('replays every recorded history with the current workflow code', async () => {
    const histories = await loadHistories();
    // Connection cycles (sleep, signals, continue-as-new), job retries, rate limits and cancellation.
    expect(histories.length).toBeGreaterThanOrEqual(6);
    const failures: string[] = [];
    let replayed = 0;
    for await (const result of Worker.runReplayHistories({ workflowBundle: await synctideBundle() }, histories)) {
      replayed += 1;
      if (result.error) failures.push(`${result.workflowId}: ${String(result.error)}`);
    }
    expect(replayed).toBe(histories.length);
    expect(failures).toEqual([]);
  });
});
