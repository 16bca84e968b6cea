import type { ActivityDeps } from './deps';

/**
 * Pauses or resumes a connection. A disabled connection stays disabled. Returns the status the
 * connection has afterwards, or null when it no longer exists.
 */
export function setConnectionStatus({ pool }: ActivityDeps) {
  return async (input: { connectionId: string; status: 'active' | 'paused' }): Promise<string | null> => {
    const { rows } = await pool.query(
      `update connections set status = case when status = 'disabled' then status else $2 end
        where id = $1 returning status`,
      [input.connectionId, input.status],
    );
    return rows[0]?.status ?? null;
  };
}
