// The model-based test of the GitHub data path (test/helpers/github-model.ts) with many runs
// (GITHUB_MODEL_RUNS, default 100); `npm test` runs a few of the same model.
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { checkGitHubModel } from '../helpers/github-model';

describe('github data path: model, long run', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('holds its invariants over many random histories', async () => {
    await checkGitHubModel(db.pool, 100);
  }, 1_800_000);
});
