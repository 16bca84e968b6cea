// Property tests explore new inputs on every local run; in CI (CI=true) they use a fixed seed so a
// run is reproducible and a rare counterexample cannot block a merge by chance. FC_SEED overrides.
import fc from 'fast-check';

const seed = process.env.FC_SEED ?? (process.env.CI ? '20261122' : undefined);
if (seed !== undefined) fc.configureGlobal({ seed: Number(seed) });
