// The model-based test of the GitHub data path (test/helpers/github-model.ts), a few runs with a
// printed seed; `npm run test:models` runs more (test/faults/github.model.slow.test.ts).
import { describe, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { checkGitHubModel } from './helpers/github-model';

describe('github data path: model', () => {
  const db = useTestDatabase();

  it('while GitHub changes between page requests: nothing existing is tombstoned, nothing changed is skipped, the feed ends equal to GitHub', async () => {
    await checkGitHubModel(db.pool, 5);
  });
});
