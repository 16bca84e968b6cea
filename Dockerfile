# One image for the production processes: the API (the default command), the worker and migrate.
# The base image is pinned by digest (node 20.20.2, Debian bookworm slim; the multi-arch index
# digest of node:20-bookworm-slim / node:20-slim at that release), so a rebuild cannot pick up a
# different image under the same tag. To move to a newer Node: `docker buildx imagetools inspect
# node:20-bookworm-slim` and replace the digest.
FROM node:20-bookworm-slim@sha256:2cf067cfed83d5ea958367df9f966191a942351a2df77d6f0193e162b5febfc0
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# Exactly the lock file's versions and integrity hashes, without dev dependencies (the embedded
# Postgres of `npm start` and the tests is one) and without running install scripts (none is
# needed: the native packages ship prebuilt binaries; this also keeps telemetry scripts quiet).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund
COPY . .
# Workers start from this bundle instead of running webpack at every start (rebuilt with the image).
RUN npm run build:workflows -- /app/dist/workflow-bundle.js
ENV WORKFLOW_BUNDLE_PATH=/app/dist/workflow-bundle.js
# The image's `node` user by number, so Kubernetes can verify runAsNonRoot.
USER 1000:1000
# Node itself is the command (PID 1), never `npm run …`: npm → sh → node would swallow SIGTERM, so
# the graceful shutdown (WORKER_SHUTDOWN_GRACE_SECONDS) would never run. Synctide's processes
# install their own SIGTERM/SIGINT handlers, which is all a PID 1 needs here (they start no
# children). The worker: ["node", "--import", "tsx", "workers/main.ts"]; migrations:
# ["node", "--import", "tsx", "scripts/migrate.ts"].
CMD ["node", "--import", "tsx", "api/main.ts"]
