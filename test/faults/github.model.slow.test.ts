// The model-based test of the GitHub data path (test/helpers/github-model.ts) with many runs
// (GITHUB_MODEL_RUNS, default 100); `npm test` runs a few of the same model.
import { describe, it } from 'vitest';
import { useTestDatabase } from '../helpers/database';
import { checkGitHubModel } from '../helpers/github-model';

const RUNS = Number(process.env.GITHUB_MODEL_RUNS ?? 100);

describe('github data path: model, long run', () => {
  const db = useTestDatabase();

  it('holds its invariants over many random histories', async () => {
    await checkGitHubModel(db.pool, RUNS);
  }, 1_800_000);
});
