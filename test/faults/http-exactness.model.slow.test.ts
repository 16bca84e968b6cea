// The http connector's exactness model (test/helpers/http-exactness-model.ts) with many more random
// scenarios per paging style than `npm test` runs: HTTP_EXACTNESS_RUNS each (default 40). No
// Temporal: the sync activity runs directly against real Postgres and the fake provider.
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../helpers/database';
import { checkHttpExactnessModel, EXACTNESS_VARIANTS, exactnessVariantName } from '../helpers/http-exactness-model';

const RUNS = Number(process.env.HTTP_EXACTNESS_RUNS ?? 40);

const db = useTestDatabase();

describe('http connector exactness model, long run', () => {
  it.each(EXACTNESS_VARIANTS.map((v) => [exactnessVariantName(v), v] as const))('%s', { timeout: 1_200_000 }, async (_name, variant) => {
    expect((await checkHttpExactnessModel(db.pool, variant, RUNS)).runs).toBe(RUNS);
  });
});
