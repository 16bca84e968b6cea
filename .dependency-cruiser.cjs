// Import boundaries, checked by `npm run lint`. Data flows one way:
//   api → commands → temporal (contract, client) / db
//   workflows → temporal contract / policy
//   activities → services / db / connectors / policy / temporal
//   services (what activities share around a provider call) → db / connectors / policy
//   policy imports nothing with I/O; lib is process plumbing under everything.
// Entry points (scripts/, bench/, the main.ts of api/ and workers/) may wire anything together;
// processes/ holds the start they share.
// Type-only imports count too: a type import of a workflow module is still a dependency on it.

/** A folder of the project, as a path regex. */
const dir = (name) => `^${name}/`;
/** The Temporal contract: every module of temporal/ except the client helpers. */
const CONTRACT = '^temporal/(?!client\\.ts$)[^/]+\\.ts$';

/** `from` may import, of the project's own modules, only what `allowed` lists (and itself). */
const onlyImports = (name, from, allowed, comment) => ({
  name,
  comment,
  severity: 'error',
  from: { path: from },
  to: { dependencyTypes: ['local'], pathNot: [...allowed, from] },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Modules that import each other cannot be read, tested or changed one at a time.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    onlyImports('policy-is-pure', dir('policy'), [], 'Pure policy: no I/O and no project imports outside policy/.'),
    onlyImports(
      'connectors-stand-alone',
      dir('connectors'),
      ['^lib/outbound\\.ts$', dir('policy')],
      'Connectors depend on nothing of the platform but pure policy (the record shapes they hand over) and the one outbound-address rule (lib/outbound.ts, shared with webhooks).',
    ),
    onlyImports('lib-is-plumbing', dir('lib'), [dir('policy')], 'lib/ is process plumbing under every layer.'),
    onlyImports('contract-is-small', CONTRACT, [CONTRACT, dir('policy')], 'The Temporal contract holds names and types only.'),
    onlyImports('temporal-client', '^temporal/client\\.ts$', [CONTRACT], 'Client helpers are typed by the contract, never by workflow code.'),
    onlyImports('workflows-see-contract-and-policy', dir('workflows'), [CONTRACT, dir('policy')], 'Workflows are deterministic: they import the contract and pure policy only.'),
    onlyImports('db-below-the-rest', dir('db'), [dir('policy')], 'SQL knows tables and the vocabulary, not the layers that use it (no connector or Temporal types).'),
    onlyImports('activities', dir('activities'), [dir('services'), dir('db'), dir('connectors'), dir('policy'), dir('temporal'), dir('lib')], 'Activities do I/O through db/ and connectors/.'),
    onlyImports(
      'services',
      dir('services'),
      [dir('db'), dir('connectors'), dir('policy'), dir('lib')],
      'What activities share around a provider call (the shared rate budget, the failure a provider error becomes): no activity, no Temporal contract.',
    ),
    onlyImports('commands', dir('commands'), [dir('db'), dir('temporal'), dir('connectors'), dir('policy'), dir('lib')], 'Commands own "write + signal/start".'),
    onlyImports(
      'api-through-commands',
      '^api/(?!main\\.ts$)',
      [dir('commands'), CONTRACT, dir('policy'), dir('lib'), '^infra/readiness\\.ts$'],
      'Routes parse, call a command, present: no SQL, no workflow code, no client calls of their own. The one exception is the process\'s readiness probe (infra/readiness.ts), which /readyz answers as it is.',
    ),
    onlyImports(
      'processes',
      dir('processes'),
      [dir('commands'), dir('infra'), dir('lib'), dir('policy')],
      'The start every serving process shares (the one boot, then the start-up steps of commands): below the entry points that run it, above what it wires.',
    ),
    onlyImports('infra', dir('infra'), [dir('db'), dir('lib'), CONTRACT, dir('policy')], 'Infrastructure: servers, connections, the boot.'),
    onlyImports('client-stands-alone', dir('clients'), [], 'The typed API client is copied into other projects: it imports nothing of the platform (generated types and openapi-fetch only).'),
    onlyImports('cli-on-the-client', dir('cli'), [dir('clients')], 'The CLI is a client of the API like any other: it talks HTTP through the typed client only.'),
    onlyImports('bin-starts-the-cli', dir('bin'), [dir('cli')], 'bin/ holds the CLI launcher only.'),
    onlyImports('workers', '^workers/(?!main\\.ts$)', [dir('activities'), dir('infra'), dir('lib'), dir('temporal'), dir('policy')], 'The worker wires activities and workflows to a connection.'),
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|\\.tools|\\.data|dist|test|bench)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json'] },
  },
};
