import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { ApiEnv } from '../env';

/** Where `/docs` takes Swagger UI from: the pinned `swagger-ui-dist` package, never a CDN. */
const SWAGGER_UI_DIR = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/** The Swagger UI version served (the installed, pinned package's). */
export const SWAGGER_UI_VERSION = (JSON.parse(readFileSync(path.join(SWAGGER_UI_DIR, 'package.json'), 'utf8')) as { version: string }).version;

/**
 * The Content-Security-Policy of the docs page: scripts, styles and fetches from this origin only
 * (no inline script, no eval, no CDN), inline styles (Swagger UI sets style attributes), images
 * from here or data: URIs (its icons), and no framing.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

// The assets, read once from the package at first use (the bundle is ≈ 1.7 MB).
const ASSETS = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
} as const;
const assetCache = new Map<string, string>();
function asset(name: keyof typeof ASSETS): string {
  let text = assetCache.get(name);
  if (text === undefined) {
    text = readFileSync(path.join(SWAGGER_UI_DIR, name), 'utf8');
    assetCache.set(name, text);
  }
  return text;
}

// The page has no inline script: the initializer is a file of its own, reading the document's
// URL from the page, so the CSP can forbid inline scripts.
const INITIALIZER = `window.addEventListener('load', function () {
  var root = document.getElementById('swagger-ui');
  window.ui = SwaggerUIBundle({ url: root.getAttribute('data-url'), dom_id: '#swagger-ui' });
});
`;

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Synctide API</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css?v=${SWAGGER_UI_VERSION}">
</head>
<body>
  <div id="swagger-ui" data-url="/openapi.json"></div>
  <script src="/docs/swagger-ui-bundle.js?v=${SWAGGER_UI_VERSION}"></script>
  <script src="/docs/init.js?v=${SWAGGER_UI_VERSION}"></script>
</body>
</html>
`;

const DOCS_PATHS = new Set(['/docs', '/openapi.json', '/docs/init.js', ...Object.keys(ASSETS).map((name) => `/docs/${name}`)]);

/** True for the OpenAPI document, the docs page and its assets (open routes: no key needed). */
export function isDocsPath(p: string): boolean {
  return DOCS_PATHS.has(p);
}

/** The OpenAPI document of every route registered on `app` (call after they all are), and `/docs`. */
export function registerDocs(app: OpenAPIHono<ApiEnv>): void {
  app.openAPIRegistry.registerComponent('securitySchemes', 'adminApiKey', {
    type: 'http',
    scheme: 'bearer',
    description: 'The ADMIN_API_KEY of the deployment',
  });
  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: {
      title: 'Synctide API',
      version: '0.1.0',
      description: 'Connections, syncs and jobs of Synctide. Every route but /healthz, /readyz and the docs needs `Authorization: Bearer <key>`: the admin key (ADMIN_API_KEY: every tenant, and the admin-only routes /tenants, /audit and /metrics), or a tenant API key, which sees only its own tenant (another tenant\'s ids answer 404).',
    },
    security: [{ adminApiKey: [] }],
  });
  app.get('/docs', (c) => {
    c.header('Content-Security-Policy', DOCS_CSP);
    return c.html(PAGE);
  });
  app.get('/docs/init.js', (c) => {
    c.header('Content-Type', 'text/javascript; charset=utf-8');
    c.header('Cache-Control', 'public, max-age=3600');
    return c.body(INITIALIZER);
  });
  for (const name of Object.keys(ASSETS) as (keyof typeof ASSETS)[]) {
    app.get(`/docs/${name}`, (c) => {
      c.header('Content-Type', ASSETS[name]);
      // Versioned URLs (?v=): a new package version is a new URL.
      c.header('Cache-Control', 'public, max-age=86400');
      return c.body(asset(name));
    });
  }
}
