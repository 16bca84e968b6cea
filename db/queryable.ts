import type { QueryResult, QueryResultRow } from 'pg';

/** A pool or a client inside a transaction: anything that runs one query. */
export interface Queryable {
  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
}
