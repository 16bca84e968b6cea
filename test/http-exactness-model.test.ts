// The exactness model of the `http` connector (test/helpers/http-exactness-model.ts), a few random
// scenarios per paging style: items deleted and created again under their old ids, edits stamped in
// the same second or a second or two back, overlapping full and incremental jobs, a page failing and
// its task retried; after quiet passes store and feed equal the provider exactly. The sync activity
// runs directly against real Postgres. HTTP_EXACTNESS_RUNS sets the runs per style; `npm run
// test:models` runs many more.
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { checkHttpExactnessModel, EXACTNESS_VARIANTS, exactnessVariantName } from './helpers/http-exactness-model';

const RUNS = Number(process.env.HTTP_EXACTNESS_RUNS ?? 3);

const db = useTestDatabase();

describe('http connector exactness model: store and feed equal the provider after quiet passes, whatever changed, overlapped or failed before', () => {
  // A run takes about a second (longer beside other files): room for HTTP_EXACTNESS_RUNS above the default.
  it.each(EXACTNESS_VARIANTS.map((v) => [exactnessVariantName(v), v] as const))('%s', { timeout: 600_000 }, async (_name, variant) => {
    expect((await checkHttpExactnessModel(db.pool, variant, RUNS)).runs).toBe(RUNS);
  });
});
