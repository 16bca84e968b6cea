import { swaggerUI } from '@hono/swagger-ui';
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { ApiEnv } from '../env';

/** The OpenAPI document of every route registered on `app` (call after they all are). */
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
  app.get('/docs', swaggerUI({ url: '/openapi.json', title: 'Synctide API' }));
}
