import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { SYNCTIDE_SEARCH_ATTRIBUTES } from '../temporal/search-attributes';
import { createSmokeActivities } from './fixtures/smoke-activities';
import { connectionCounter } from './fixtures/smoke-workflows';
import { useServers } from './helpers/stack';
import { prebuiltBundle } from './helpers/worker';

describe('Temporal dev server with Postgres', () => {
  const servers = useServers();

  it('registers the Synctide search attributes', async () => {
    const { env } = servers;
    const { customAttributes } = await env.connection.operatorService.listSearchAttributes({ namespace: 'default' });
    for (const key of SYNCTIDE_SEARCH_ATTRIBUTES) expect(Object.keys(customAttributes)).toContain(key.name);
  });

  it('runs a workflow whose activity reads Postgres', async () => {
    const { env, db } = servers;
    await db.pool.query(
      `insert into connections (tenant_id, provider_slug, app_key) values ('t1', 'demo', 'a'), ('t1', 'demo', 'b')`,
    );
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue: 'smoke-dev',
      workflowBundle: await prebuiltBundle('smokeBundlePath'),
      activities: createSmokeActivities(db.pool),
    });
    const count = await worker.runUntil(
      env.client.workflow.execute(connectionCounter, { taskQueue: 'smoke-dev', workflowId: 'count-connections' }),
    );
    expect(count).toBe(2);
  });
});
