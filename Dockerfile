# One image for both production processes: `npm run api` and `npm run worker`.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
# Workers start from this bundle instead of running webpack at every start (rebuilt with the image).
RUN npm run build:workflows -- /app/dist/workflow-bundle.js
ENV WORKFLOW_BUNDLE_PATH=/app/dist/workflow-bundle.js
USER node
CMD ["npm", "run", "api"]
