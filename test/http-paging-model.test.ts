// The model-based test of the `http` connector under change (test/helpers/http-paging-model.ts),
// a few random scenarios per paging style: none, Link header, next URL, cursor (keyset-based, as
// real providers' are), page numbers and offsets (read until two reads agree), and page numbers
// and offsets by keyset (`order: 'change_ascending'`), and Link headers and cursors over a listing
// newest first (caught up with at a pass's end). The sync activity runs directly against real
// Postgres. HTTP_MODEL_RUNS sets the runs per style; `npm run test:models` runs many more.
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { checkHttpPagingModel, MODEL_VARIANTS, variantName } from './helpers/http-paging-model';

const RUNS = Number(process.env.HTTP_MODEL_RUNS ?? 2);

const db = useTestDatabase();

describe('http connector model: stored records equal the provider after quiet passes, whatever changed during earlier ones', () => {
  it.each(MODEL_VARIANTS.map((v) => [variantName(v), v] as const))('%s', async (_name, variant) => {
    const stats = await checkHttpPagingModel(db.pool, variant, RUNS);
    expect(stats.runs).toBe(RUNS);
  });
});
