// The model-based test of the GitHub data path (test/helpers/github-model.ts), a few runs with a
// printed seed; `npm run test:models` runs more (test/faults/github.model.slow.test.ts).
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { checkGitHubModel } from './helpers/github-model';

describe('github data path: model', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('while GitHub changes between page requests: nothing existing is tombstoned, nothing changed is skipped, the feed ends equal to GitHub', async () => {
    await checkGitHubModel(db.pool, 5);
  });
});
