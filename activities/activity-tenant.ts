import { connectionTenant, deliveryTenant, jobTenant, purgeTenant } from '../db/models/owners';
import { connectionIdOf, purgeIdOf } from '../temporal/ids';
import type { ActivityDeps } from './deps';

/** Connections and jobs whose tenant is remembered per worker process; the oldest are dropped beyond this many. */
const MAX_REMEMBERED = 10_000;

/** What the lane gate knows of an activity when it asks for its tenant. */
export interface ActivityOf {
  activityType: string;
  workflowId: string;
  args: readonly unknown[];
}

/** The activities of a connection purge: long runs of deletes, each its tenant's work. */
const PURGE_ACTIVITIES = new Set(['quiesceConnection', 'purgeConnectionBatch']);

/** The activities of a webhook delivery (`{ deliveryId }`): an attempt, and the failure that ends one. */
const DELIVERY_ACTIVITIES = new Set(['deliverWebhook', 'failWebhookDelivery']);

/**
 * The tenant a scheduled activity works for, as the worker's lane gate shares a hot node between
 * tenants and the worker's pool gives each tenant's statements turns: a sync task's, from its
 * connection when its job runs in the connection's workflow (read once per connection, then
 * remembered: a connection's tenant never changes), otherwise from its job (once per job); a
 * purge's (its `connection-purge:` workflow's purge, once per purge), so a tenant deleting many
 * connections holds no more of the pool than its share; a webhook delivery's (its webhook's, once
 * per delivery), so a tenant's attempts waiting on their rows (its webhook's deletion holds them)
 * hold no more of it either; '' for every other activity (short bookkeeping), and when the row is
 * gone or cannot be read: the tenant orders waiting activities, so a failed read must not fail
 * the activity.
 */
export function activityTenant(deps: Pick<ActivityDeps, 'pool'>): (activity: ActivityOf) => Promise<string> {
  const remembered = new Map<string, string>();
  const lookUp = async (key: string, read: () => Promise<string | null>): Promise<string> => {
    const known = remembered.get(key);
    if (known !== undefined) return known;
    const tenant = await read().catch(() => null);
    if (tenant === null) return '';
    remembered.set(key, tenant);
    if (remembered.size > MAX_REMEMBERED) remembered.delete(remembered.keys().next().value!);
    return tenant;
  };
  return async ({ activityType, workflowId, args }) => {
    if (PURGE_ACTIVITIES.has(activityType)) {
      const purgeId = purgeIdOf(workflowId);
      return purgeId === null ? '' : lookUp(`purge:${purgeId}`, () => purgeTenant(deps.pool, purgeId));
    }
    if (DELIVERY_ACTIVITIES.has(activityType)) {
      const deliveryId = (args[0] as { deliveryId?: unknown } | undefined)?.deliveryId;
      return typeof deliveryId === 'string' ? lookUp(`delivery:${deliveryId}`, () => deliveryTenant(deps.pool, deliveryId)) : '';
    }
    if (activityType !== 'syncTask') return '';
    const connectionId = connectionIdOf(workflowId);
    if (connectionId !== null) return lookUp(`connection:${connectionId}`, () => connectionTenant(deps.pool, connectionId));
    const jobId = (args[0] as { jobId?: unknown } | undefined)?.jobId;
    if (typeof jobId !== 'string') return '';
    return lookUp(`job:${jobId}`, () => jobTenant(deps.pool, jobId));
  };
}
