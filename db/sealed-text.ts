// A text column that holds a sealed secret (`enc:v1:<key id>:…`), as sealing and key rotation
// walk it: the same three statements for every such column, the table and column named by the
// model that owns them (constants of the model, never input).
import type { Queryable } from './queryable';

/** The statements a sealing pass runs on one sealed text column. */
export interface SealedTextColumn {
  /**
   * The next `limit` rows after `afterId` whose value is not sealed under key `activeId` (null:
   * not sealed at all, legacy plaintext).
   */
  listToReseal(db: Queryable, activeId: string | null, afterId: string, limit: number): Promise<{ id: string; stored: string }[]>;
  /** Replaces row `id`'s value with `sealed` only if it still is `stored` (compare and set). */
  replace(db: Queryable, id: string, stored: string, sealed: string): Promise<boolean>;
  /** How many rows hold a value not sealed under key `activeId`. */
  countToReseal(db: Queryable, activeId: string): Promise<number>;
}

/** The sealing statements of `table`.`column`. */
export function sealedTextColumn(table: string, column: string): SealedTextColumn {
  return {
    async listToReseal(db, activeId, afterId, limit) {
      const { rows } = await db.query<{ id: string; stored: string }>(
        `select id, ${column} as stored from ${table}
          where id > $2 and not starts_with(${column}, 'enc:v1:' || coalesce($1::text || ':', ''))
          order by id limit $3`,
        [activeId, afterId, limit],
      );
      return rows;
    },
    async replace(db, id, stored, sealed) {
      const { rowCount } = await db.query(`update ${table} set ${column} = $3 where id = $1 and ${column} = $2`, [id, stored, sealed]);
      return (rowCount ?? 0) > 0;
    },
    async countToReseal(db, activeId) {
      const { rows } = await db.query<{ n: number }>(
        `select count(*)::int as n from ${table} where not starts_with(${column}, 'enc:v1:' || $1 || ':')`,
        [activeId],
      );
      return rows[0]!.n;
    },
  };
}
