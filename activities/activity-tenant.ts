import { jobTenant } from '../db/models/owners';
import type { ActivityDeps } from './deps';

/** Jobs whose tenant is remembered per worker process; the oldest are dropped beyond this many. */
const MAX_REMEMBERED = 10_000;

/**
 * The tenant a scheduled activity works for, as the worker's lane gate shares a hot node between
 * tenants: a sync task's, from its job (read once per job, then remembered: a job's tenant never
 * changes); '' for every other activity (short bookkeeping and deliveries), and when the job is
 * gone or cannot be read: the tenant is a hint for the order of waiting activities, so a failed
 * read must not fail the activity.
 */
export function activityTenant(deps: Pick<ActivityDeps, 'pool'>): (activityType: string, args: readonly unknown[]) => Promise<string> {
  const remembered = new Map<string, string>();
  return async (activityType, args) => {
    if (activityType !== 'syncTask') return '';
    const jobId = (args[0] as { jobId?: unknown } | undefined)?.jobId;
    if (typeof jobId !== 'string') return '';
    const known = remembered.get(jobId);
    if (known !== undefined) return known;
    const tenant = await jobTenant(deps.pool, jobId).catch(() => null);
    if (tenant === null) return '';
    remembered.set(jobId, tenant);
    if (remembered.size > MAX_REMEMBERED) remembered.delete(remembered.keys().next().value!);
    return tenant;
  };
}
