// The configuration reference: what each environment variable means. Keyed by the schemas that
// parse the variables, so a variable cannot be added to them without its line here (TypeScript
// checks the keys), and its default is read from the schema itself. `npm run docs:config` writes
// the table of docs/operations.md from here; test/config.test.ts fails when the page differs.
import { DEFAULT_BUDGET_RESERVE, MAX_BUDGET_COUNT } from '../policy/rate-budget';
import { envSchema, SECRET_VARIABLES } from './config';
import { rateLimitEnvSchema } from './rate-limit-config';

/** What a variable means, and its default in words where the schema's own would mislead (none, or computed). */
export interface VariableDoc {
  meaning: string;
  shown?: string;
  /** Words after the schema's default. */
  note?: string;
}

/** Variables read outside the two schemas: the rate budget (lib/rate-budget-config.ts) and the Temporal binaries (infra/temporal-binaries.ts). */
type OtherVariable = 'RATE_BUDGET_RESERVE' | 'RATE_BUDGETS' | 'TEMPORAL_CLI_PATH' | 'TEMPORAL_TEST_SERVER_PATH' | 'SYNCTIDE_TOOLS_DIR' | 'SYNCTIDE_PYTHON';
type Variable = keyof typeof envSchema.shape | keyof typeof rateLimitEnvSchema.shape | OtherVariable;

const M_DATABASE_MIGRATION_URL =
  'the schema owner\'s role, used for migrations only ([security](security.md))';
const M_TEMPORAL_TLS_CERT =
  'client certificate and key files for mTLS (both or neither)';
const M_TEMPORAL_CLI_PATH =
  'explicit Temporal binaries';
const M_API_RATE_LIMIT_PER_SECOND =
  'token bucket per API key and API process: sustained requests per second, and the burst above it; over it, 429 with `Retry-After`';
const M_JITTER_PCT_MIN =
  'jitter bounds as fractions of the interval (0 ≤ min ≤ max < 1)';
const M_PROVIDER_MAX_PAGES_PER_TASK =
  'most pages and records one task (or one resource of an immediate sync) fetches before it fails';
const M_RATE_LIMIT_BASE_SECONDS =
  'rate-limit backoff (max ≥ base, jitter 0–1)';

/** Every variable, in the table's order; consecutive ones with the same meaning share a row. */
export const CONFIG_DOCS: Record<Variable, VariableDoc> = {
  NODE_ENV: { meaning: '`production` in the image and compose (libraries read it; Synctide itself behaves the same)' },
  LOG_LEVEL: { meaning: 'pino level' },
  DATABASE_URL: {
    meaning:
      "`postgres://…` URL; required by `npm run api` / `npm run worker`. node-postgres reads `sslmode=require` (and `prefer`, `verify-ca`) as `verify-full` unless the URL also has `uselibpqcompat=true`, which gives libpq's meaning (`require`: encrypted, the certificate not checked; `sslrootcert=<file>` for a private CA)",
    shown: 'embedded Postgres',
  },
  DATABASE_PASSWORD: { meaning: 'password put into `DATABASE_URL` (so the URL itself holds none)' },
  DATABASE_MIGRATION_URL: { meaning: M_DATABASE_MIGRATION_URL, shown: '`DATABASE_URL`' },
  DATABASE_MIGRATION_PASSWORD: { meaning: M_DATABASE_MIGRATION_URL, shown: '`DATABASE_URL`' },
  MIGRATE_ON_START: { meaning: '`false`: the process applies no migrations (a separate `npm run migrate` does, as the owner)' },
  DATABASE_POOL_MAX: { meaning: 'connections per pool (`npm start` has two: the API\'s and the worker\'s); a worker process also has its immediate syncs\' own pool of 2 × IMMEDIATE_SYNC_SLOTS and its local activities\' (the bookkeeping its workflow tasks wait for) of half DATABASE_POOL_MAX, at least 2. An API process serves at most half its pool\'s worth of one tenant\'s requests at once, and a worker runs at most half its activities\' pool\'s worth of one tenant\'s statements at once (more wait their turn), so raise it with the requests or page writes one tenant should have in flight' },
  API_STATEMENT_TIMEOUT_SECONDS: { meaning: '`statement_timeout` of the API\'s connections (0: none). A statement with no answer at all after twice this (at least this plus 5 s) fails on the client and its connection is dropped: a database or network that stops answering (black-holed) fails requests instead of hanging them (the ping of `/readyz` gives its connection up after 2 s without an answer, and sends no other while one is unanswered); the same rule holds for the worker\'s timeout; at most 1073741 (half the longest timer, 2^31 − 1 ms, as the client-side limit is twice it)' },
  WORKER_STATEMENT_TIMEOUT_SECONDS: { meaning: '`statement_timeout` of the worker\'s connections (0: none); its longest statements are a full sync\'s deletion of unseen records and the retention clean-up, while a 1,000-record page upsert takes ≈ 20 ms (`BENCHMARKS.md`). Migrations run on their own connection without these limits; at most 1073741, for the same reason' },
  IDLE_IN_TRANSACTION_TIMEOUT_SECONDS: { meaning: '`idle_in_transaction_session_timeout` of every pooled connection (0: none); at most 2147483 (2^31 − 1 ms, the most Postgres takes)' },
  DATA_DIR: { meaning: 'where `npm start` keeps the embedded Postgres and Temporal state' },
  EMBEDDED_PG_PORT: { meaning: 'port of the embedded Postgres' },
  TEMPORAL_ADDRESS: { meaning: '`host:port` of a Temporal frontend (an IPv6 address in brackets: `[fd00::7]:7233`); required by `npm run api` / `npm run worker`', shown: 'dev server' },
  TEMPORAL_NAMESPACE: { meaning: 'Temporal namespace' },
  DATABASE_STARTUP_WAIT_SECONDS: { meaning: '`npm run migrate`: how long it waits for Postgres to accept connections (retrying every 2 s, logging each wait) before it exits 1' },
  TEMPORAL_STARTUP_WAIT_SECONDS: { meaning: 'how long a starting process waits for TEMPORAL_ADDRESS to answer and TEMPORAL_NAMESPACE to exist (retrying every 2 s and logging what it waits for) before it exits 1' },
  TEMPORAL_TLS: { meaning: 'connect to `TEMPORAL_ADDRESS` over TLS (implied by any of the next four)' },
  TEMPORAL_TLS_CA: { meaning: 'file of the CA that signed the Temporal frontend\'s certificate', shown: 'system CAs' },
  TEMPORAL_TLS_CERT: { meaning: M_TEMPORAL_TLS_CERT },
  TEMPORAL_TLS_KEY: { meaning: M_TEMPORAL_TLS_CERT },
  TEMPORAL_TLS_SERVER_NAME: { meaning: 'name the server\'s certificate is checked against', shown: 'host of the address' },
  TEMPORAL_API_KEY: { meaning: 'API key for the client and worker connections (Temporal Cloud); always over TLS' },
  TEMPORAL_TASK_QUEUE: { meaning: 'task queue of the worker' },
  TEMPORAL_DEV_PORT: { meaning: 'gRPC port of the dev server started by `npm start`' },
  TEMPORAL_UI_PORT: { meaning: 'Web UI port of the dev server' },
  TEMPORAL_CLI_PATH: { meaning: M_TEMPORAL_CLI_PATH },
  TEMPORAL_TEST_SERVER_PATH: { meaning: M_TEMPORAL_CLI_PATH },
  SYNCTIDE_TOOLS_DIR: { meaning: 'where Temporal binaries are installed on demand', shown: '`.tools`' },
  SYNCTIDE_PYTHON: { meaning: 'Python used to create that venv', shown: '`python3`' },
  API_HOST: { meaning: 'interface the API (and the worker\'s metrics server) binds' },
  API_PORT: { meaning: 'API port' },
  API_TEMPORAL_TIMEOUT_SECONDS: { meaning: 'how long the calls to Temporal of one API request (a pause\'s, resume\'s or schedule change\'s signal, a disable\'s cancel, a workflow start, a job\'s cancel) may take together, counted from the first of them (its waits for its turn at the database pool and on the database before it are not counted); then it answers 503 `unavailable` (Temporal) and what it stored before the call stays stored, for the reconcile tick to act on (see *Temporal answers nothing* in the operator guide). A Temporal that takes connections and answers nothing (a hung server, a black-holed address) fails requests this way instead of holding them, and their tenant\'s turn, until the client gives up. Each attempt of a workflow start made after the answer has a deadline of this length of its own; an immediate sync\'s wait for its workflow is bounded by `IMMEDIATE_SYNC_TIMEOUT_SECONDS` instead; at most 2147483' },
  API_SHUTDOWN_GRACE_SECONDS: { meaning: 'how long `npm run api` takes at most to stop on SIGTERM: requests in flight may answer until a second before its end (half of it, when shorter), then the statements they still run are cancelled (each write is one transaction, so a cut request changed nothing) and the process exits. Keep it below the time to SIGKILL (Docker: 10 s by default). The Helm chart sets it from `api.shutdownGraceSeconds` and gives its API pods that plus 20 s after the preStop wait (`env` may not set it). `npm start` stops its API by the same rule, then its worker and the servers it started' },
  ADMIN_API_KEY: { meaning: 'admin bearer key: at least 32 random characters (`openssl rand -hex 32`); placeholders such as `change-me…`, `example`, `secret`, and keys of few distinct or mostly consecutive characters are refused; required by `npm run api`', shown: 'generated by `npm start`' },
  CREDENTIALS_KEY: { meaning: '32 bytes, base64 (`openssl rand -base64 32`): seals credentials and webhook secrets at rest (key id `default`); `npm run api` / `npm run worker` need it or `CREDENTIALS_KEYS`', shown: 'generated by `npm start` into `DATA_DIR/credentials-key`' },
  CREDENTIALS_KEYS: { meaning: 'several keys for rotation: `id:base64,id:base64` (ids of letters, digits, `_`, `-`)' },
  CREDENTIALS_ACTIVE_KEY_ID: { meaning: 'id of the key new secrets are sealed with; required when several keys are configured', shown: 'the only key' },
  METRICS_PUBLIC: { meaning: '`true` serves `/metrics` without the admin key (its labels carry tenant ids)' },
  API_RATE_LIMIT_PER_SECOND: { meaning: M_API_RATE_LIMIT_PER_SECOND },
  API_RATE_LIMIT_BURST: { meaning: M_API_RATE_LIMIT_PER_SECOND },
  API_AUTH_FAILURES_PER_MINUTE: {
    meaning:
      'failed lookups of well-formed tenant keys (`stk_…`) per client address, in each API process: that many at once, refilled at that many a minute (a lookup holds a token while it runs, given back when the key is found, so no more run at once from one address: one beyond them waits for those in flight, and a burst of valid keys is never refused); once failed lookups have spent it a tenant key from that address answers 429 with `Retry-After` before any lookup; the OAuth callback\'s state lookups share the bucket (a callback answered 400, its state unknown, used or expired, spends a token; once spent, 429 before any lookup) (an IPv6 address counts as its /64; behind a reverse proxy its address is the one counted unless `TRUSTED_PROXIES` names it; the admin key is never held back)',
  },
  TRUSTED_PROXIES: {
    shown: 'none',
    meaning:
      'the reverse proxies in front of the API (IP addresses and CIDR ranges, comma-separated, e.g. `10.0.0.0/8,fd00::/8`; what the API sees as the TCP peer of the proxy\'s requests). A request whose peer is one of them is counted, for `API_AUTH_FAILURES_PER_MINUTE`, as the rightmost `X-Forwarded-For` entry that is not one of them (the proxy must append the address it took the request from, as Caddy and nginx\'s `$proxy_add_x_forwarded_for` do); unset, the TCP peer is the client and `X-Forwarded-For` is never read, whoever sends it. IPv6 clients are counted per /64 ([security](security.md))',
  },
  FEED_PAGE_MAX_BYTES: {
    meaning:
      'byte budget of one page of the records feed (`GET /connections/{id}/records`): a page stops before the record whose data would pass it, with `has_more` true; one record always comes, however large',
  },
  WORKER_METRICS_PORT: { meaning: '`/metrics`, `/healthz` (liveness) and `/readyz` (readiness: 200 while its workers run and Temporal answers their connection within 2 s, 503 before, while it does not, and from the moment shutdown begins; the answer names each worker\'s state and `temporal`: `ok` or `unreachable`; Postgres is not asked, see the operator guide) of `npm run worker`' },
  WORKER_SHUTDOWN_GRACE_SECONDS: { meaning: 'how long in-flight activities may finish on shutdown' },
  WORKER_MAX_CACHED_WORKFLOWS: { meaning: 'workflow runs a worker keeps in memory; a connection woken from outside the cache replays its short history (see *Worker memory* in the operator guide)', shown: 'sized to the memory limit: 50–250, 250 without a limit' },
  WORKER_TARGET_CPU: {
    meaning:
      'the CPU use (above 0, at most 1) above which, while an immediate sync runs in the worker process (and for 5 s after), its scheduled lane starts no more than 4 activities (the others wait in the worker, heartbeating) and runs one workflow task at a time from each of its queues, so that the immediate answer finds a core. Measured against the container\'s CPU limit when it has one (cgroup v2), otherwise the host\'s; `1`: never (see *A saturated node* in the operator guide)',
  },
  WORKFLOW_BUNDLE_PATH: { meaning: 'a workflow bundle built by `npm run build` (`dist/workflow-bundle.js`, what the image sets) or `npm run build:workflows -- <file>`; the worker then starts without bundling (rebuild it with every workflow change; unset, the worker bundles at start)' },
  SCHEDULER_TICK_SECONDS: { meaning: 'reconcile tick period (it also paces the tombstoning of records a config change stopped selecting beyond its request\'s batch: at most 50,000 records visited a tick); at most 2147483 (2^31 − 1 ms, the longest Node timer)' },
  DEFAULT_INTERVAL_SECONDS: { meaning: 'sync interval when a connection sets none (≥ 60)' },
  MAX_OVERRIDDEN_INTERVAL_SECONDS: { meaning: 'largest allowed `metadata.sync.interval_seconds` (≥ 60)' },
  JITTER_PCT_MIN: { meaning: M_JITTER_PCT_MIN },
  JITTER_PCT_MAX: { meaning: M_JITTER_PCT_MIN },
  RETENTION_DAYS: { meaning: 'finished jobs older than this are deleted, with their tasks and logs; so are webhook events older than this none of whose deliveries is still pending, with their deliveries and attempts (`GET /webhooks/:id/deliveries` no longer lists them), connection purges completed longer ago (`GET /purges/:id` then answers 404), and alerts resolved longer ago' },
  TOMBSTONE_RETENTION_DAYS: { meaning: 'tombstones of deleted records older than this are purged (a records-feed cursor older than a purged one answers 410)' },
  AUDIT_LOG_RETENTION_DAYS: { meaning: '`audit_log` entries older than this are deleted by the daily retention clean-up (in batches), whose worker setting applies' },
  WEBHOOK_DELIVERY_SLOTS: { meaning: 'webhook delivery attempts a worker process runs at once, of its 100 activity slots (1–99); tenants with deliveries to make share them equally, and an attempt over its tenant\'s share is deferred a few seconds without calling the receiver' },
  WEBHOOK_ALLOW_PRIVATE: { meaning: 'webhook URLs may name loopback, private and link-local addresses; never in production', note: '(`true` under `npm start`)' },
  IMMEDIATE_SYNC_TIMEOUT_SECONDS: { meaning: 'how long `POST /sync` with `immediate: true` may run; then it is cancelled and answers 504 with what it fetched so far; at most 2147483 (2^31 − 1 ms, the longest Node timer)' },
  IMMEDIATE_SYNC_TASK_QUEUE: { meaning: 'task queue of immediate syncs, their workflows and activities (API and workers must agree)', shown: '`<TEMPORAL_TASK_QUEUE>-immediate`' },
  IMMEDIATE_SYNC_SLOTS: { meaning: 'immediate syncs a worker process runs at once (on their own queue and database pool of twice as many connections, apart from scheduled work)' },
  TENANT_MAX_CONNECTIONS: { meaning: 'connections a tenant may have (those being purged no longer count, up to as many as the limit; beyond that they do); over it, 409 `tenant_limit`. The admin overrides each TENANT_MAX_* per tenant (`PATCH /tenants/{tenant_id}/limits`)' },
  TENANT_MAX_WEBHOOKS: { meaning: 'webhooks a tenant may have; over it, 409 `tenant_limit`' },
  TENANT_MAX_IMMEDIATE_SYNCS: { meaning: 'immediate syncs of one tenant running at once, across all API processes; over it, 429 `tenant_limit` with `Retry-After`. Keep it below IMMEDIATE_SYNC_SLOTS × workers' },
  TENANT_MAX_RUNNING_JOBS: { meaning: 'places of one tenant\'s sync jobs running at once (a job takes one per task it runs at once: its connection\'s `max_parallel_tasks`, 1–8, no more than its tasks; a connection\'s purge one while it runs); more wait (queued or retrying) on a durable timer of 65–95 s and claim again. Keep it below the activity slots of all workers (100 each)' },
  TENANT_MAX_REDELIVERIES_PER_HOUR: { meaning: 'webhook redeliveries a tenant may ask for in any sliding hour; over it, 429 `tenant_limit` with `Retry-After`' },
  TENANT_MAX_OAUTH_APPS: { meaning: 'OAuth apps a tenant may register; over it, 409 `tenant_limit`' },
  TENANT_MAX_OAUTH_STATES: { meaning: 'connect flows of one tenant under way at once (`POST /connections/{id}/oauth/authorize` states neither used by a callback nor expired: they live 10 minutes); over it, 429 `tenant_limit` (`max_oauth_states`) with `Retry-After` until the oldest expires. Not overridden per tenant' },
  PROVIDER_HOSTS: { meaning: "comma-separated host names provider URLs and OAuth apps' token URLs may name (github.com is a GitHub OAuth app's token URL's host; add GitHub Enterprise hosts)" },
  PROVIDER_ALLOW_PRIVATE: { meaning: 'provider URLs may be plain http and reach loopback, private and link-local addresses; test servers only, never in production', note: '(`true` under `npm start`)' },
  PROVIDER_MAX_RESPONSE_BYTES: { meaning: 'largest provider response body, after decompression; a compressed one may take at most 1/1024 and 1 KiB more as sent' },
  PROVIDER_REQUEST_TIMEOUT_SECONDS: { meaning: 'time for one provider request, body and the redirects it follows included; at most 2147483 (2^31 − 1 ms, the longest Node timer)' },
  PROVIDER_MAX_RECORD_BYTES: { meaning: 'largest record, as JSON with its numbers written out in full' },
  PROVIDER_MAX_PAGES_PER_TASK: { meaning: M_PROVIDER_MAX_PAGES_PER_TASK },
  PROVIDER_MAX_RECORDS_PER_TASK: { meaning: M_PROVIDER_MAX_PAGES_PER_TASK },
  RATE_LIMIT_BASE_SECONDS: { meaning: M_RATE_LIMIT_BASE_SECONDS },
  RATE_LIMIT_MAX_SECONDS: { meaning: M_RATE_LIMIT_BASE_SECONDS },
  RATE_LIMIT_JITTER_FACTOR: { meaning: M_RATE_LIMIT_BASE_SECONDS },
  RATE_LIMIT_OVERRIDES: { meaning: 'per-provider JSON, e.g. `{"github":{"base_seconds":10}}` (keys `base_seconds`, `max_seconds`, `jitter_factor`)' },
  RATE_LIMIT_RETRY_CAP: { meaning: 'rate-limit retries of one job before it fails' },
  DEMO_CONNECTOR: { meaning: 'registers the `demo` provider (synthetic data with fault-injection hooks); off, a `demo` connection is refused with 400', note: '(`true` under `npm start`)' },
  RATE_BUDGET_RESERVE: { shown: `\`${DEFAULT_BUDGET_RESERVE}\``, meaning: `requests of a tenant's credential's provider limit never spent: at that many left, syncs wait durably for the provider's reset (at most ${MAX_BUDGET_COUNT})` },
  RATE_BUDGETS: { meaning: `per-provider JSON, e.g. \`{"github": {"reserve": 50, "per_second": 10}}\` (keys \`reserve\`, \`per_second\`, \`per_minute\`, each a whole number up to ${MAX_BUDGET_COUNT}); a connection's \`config.rate_budget\` overrides it` },
  RATE_BUDGET_MAX_RESET_SECONDS: { meaning: 'the furthest a provider\'s stated rate-limit reset or `Retry-After` is believed: a further one (a provider, or a connection\'s `rate_limit` header mapping, naming a reset decades away) is taken as this far, and the job\'s error says so' },
  START_DEMO: { meaning: '`npm start` creates a demo connection in an empty database (needs `DEMO_CONNECTOR`)' },
  OTEL_EXPORTER_OTLP_ENDPOINT: { meaning: 'OpenTelemetry traces: spans go over OTLP (HTTP/protobuf) to `<endpoint>/v1/traces`, e.g. `http://localhost:4318`; unset, tracing is off (no SDK, no spans). The SDK\'s other `OTEL_*` variables apply ([traces](#traces))' },
  OTEL_SDK_DISABLED: { meaning: 'OpenTelemetry\'s switch: `true` (any case) turns tracing off even with `OTEL_EXPORTER_OTLP_ENDPOINT` set; any other value leaves it as that says' },
};

/** The default a variable's schema gives when it is unset, as the table shows it. */
function schemaDefault(name: Variable): string {
  const parsed: Record<string, unknown> = { ...envSchema.parse({}), ...rateLimitEnvSchema.parse({}) };
  const value = parsed[name];
  if (value === undefined) return '—';
  return `\`${Array.isArray(value) ? value.join(',') : String(value)}\``;
}

const cell = (text: string) => text.replaceAll('|', '\\|');

/** The configuration table (Markdown) of docs/operations.md. */
export function configTable(): string {
  const rows: string[] = ['| variable | default | meaning |', '| --- | --- | --- |'];
  const names = Object.keys(CONFIG_DOCS) as Variable[];
  const secretFiles = SECRET_VARIABLES.map((name) => `\`${name}\``).join(', ');
  rows.push(
    `| \`<SECRET>_FILE\` (e.g. \`DATABASE_URL_FILE\`, \`ADMIN_API_KEY_FILE\`) | — | any secret variable (${secretFiles}) may be read from a file instead (Docker/Kubernetes secrets; one trailing newline dropped); a secret's value is never echoed in a configuration error |`,
  );
  for (let i = 0; i < names.length; ) {
    const meaning = CONFIG_DOCS[names[i]!].meaning;
    let j = i;
    while (j < names.length && CONFIG_DOCS[names[j]!].meaning === meaning) j += 1;
    const group = names.slice(i, j);
    const defaults = group.map((name) => {
      const doc = CONFIG_DOCS[name];
      return doc.shown ?? (doc.note ? `${schemaDefault(name)} ${doc.note}` : schemaDefault(name));
    });
    const shown = defaults.every((d) => d === defaults[0]) ? defaults[0]! : defaults.join(', ');
    rows.push(`| ${group.map((name) => `\`${name}\``).join(', ')} | ${cell(shown)} | ${cell(meaning)} |`);
    i = j;
  }
  return rows.join('\n');
}
