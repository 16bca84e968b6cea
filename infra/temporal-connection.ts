import { Client, Connection } from '@temporalio/client';
import { ensureSearchAttributes } from './temporal-namespace';

/**
 * Opens the process's one Temporal client connection and makes sure Synctide's search attributes
 * exist in the namespace before any workflow upserts them.
 */
export async function connectTemporal(address: string, namespace: string): Promise<Client> {
  const connection = await Connection.connect({ address });
  try {
    await ensureSearchAttributes(connection, namespace);
  } catch (err) {
    await connection.close();
    throw err;
  }
  return new Client({ connection, namespace });
}
