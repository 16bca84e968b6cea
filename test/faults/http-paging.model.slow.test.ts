// The http connector's model-based test (test/helpers/http-paging-model.ts) with many more random
// scenarios per paging style than `npm test` runs: HTTP_MODEL_RUNS each (default 50). No Temporal:
// the sync activity runs directly against real Postgres and the fake provider.
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../helpers/database';
import { checkHttpPagingModel, MODEL_VARIANTS, variantName } from '../helpers/http-paging-model';

const RUNS = Number(process.env.HTTP_MODEL_RUNS ?? 50);

const db = useTestDatabase();

describe('http connector model, long run', () => {
  it.each(MODEL_VARIANTS.map((v) => [variantName(v), v] as const))('%s', { timeout: 1_200_000 }, async (_name, variant) => {
    const stats = await checkHttpPagingModel(db.pool, variant, RUNS);
    expect(stats.runs).toBe(RUNS);
  });
});
