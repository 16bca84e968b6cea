// How a command's waits that hold no database connection leave the caller's turn at the pool.

/**
 * Runs `wait`, a wait that holds no database connection, outside the caller's turn at the pool: the
 * turn is given up for it and taken again (waiting for it as any request does) before anything
 * after it uses the database. An API request's turns are its tenant's share of the pool
 * (api/middleware/tenant-turns.ts); a caller without turns runs `wait` as it is.
 */
export type WaitOutsideTurn = <T>(wait: () => Promise<T>) => Promise<T>;

/**
 * A turn at the pool as a command holds it from its start: `end` gives it up when the command ends
 * (once), `outsideTurn` runs a wait that holds no database connection outside it.
 */
export interface HeldTurn {
  outsideTurn: WaitOutsideTurn;
  end(): void;
}
