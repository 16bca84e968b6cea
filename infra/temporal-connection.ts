import { Client, Connection } from '@temporalio/client';
import type { TemporalSecurity } from '../lib/config';
import { ensureSearchAttributes } from './temporal-namespace';

/**
 * The connection options of the client and of the worker's native connection: the address, and
 * TLS (server CA, client certificate for mTLS, server name) and the API key when configured.
 */
export function temporalConnectionOptions(address: string, security: TemporalSecurity = {}): { address: string } & TemporalSecurity {
  return { address, ...(security.tls && { tls: security.tls }), ...(security.apiKey && { apiKey: security.apiKey }) };
}

/**
 * Opens the process's one Temporal client connection and makes sure Synctide's search attributes
 * exist in the namespace before any workflow upserts them.
 */
export async function connectTemporal(address: string, namespace: string, security: TemporalSecurity = {}): Promise<Client> {
  const connection = await Connection.connect(temporalConnectionOptions(address, security));
  try {
    await ensureSearchAttributes(connection, namespace);
  } catch (err) {
    await connection.close();
    throw err;
  }
  return new Client({ connection, namespace });
}
