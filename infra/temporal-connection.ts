import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection, isGrpcServiceError } from '@temporalio/client';
import type { TemporalSecurity } from '../lib/config';
import type { Logger } from '../lib/logger';
import { temporalClientInterceptors } from '../lib/tracing';
import { ensureSearchAttributes } from './temporal-namespace';

const GRPC_NOT_FOUND = 5;
const GRPC_UNAVAILABLE = 14;
const GRPC_DEADLINE_EXCEEDED = 4;
/** The client's own connect deadline, and the shortest a try waits when the bound is nearly spent. */
const CONNECT_TIMEOUT_MS = 10_000;
const MIN_CONNECT_TIMEOUT_MS = 1_000;

/** How a starting process waits for Temporal: at most `timeoutMs`, a try every `retryMs`. */
export interface StartupWait {
  timeoutMs: number;
  retryMs?: number;
  logger?: Pick<Logger, 'warn'>;
}

/**
 * What a failed start-up step waits for, or null when the failure will not pass by waiting
 * (a TLS or API-key refusal, an invalid namespace name): the server not answering yet, or the
 * namespace not registered yet (Temporal's schema and namespace jobs still running).
 */
export function startupWaitReason(err: unknown, address: string, namespace: string): string | null {
  if (isGrpcServiceError(err) && err.code === GRPC_NOT_FOUND) return `Temporal namespace '${namespace}' to be registered at ${address}`;
  if (isGrpcServiceError(err) && (err.code === GRPC_UNAVAILABLE || err.code === GRPC_DEADLINE_EXCEEDED)) return `the Temporal frontend at ${address} to answer`;
  // Connection.connect's own failure to reach the server within its deadline.
  if (err instanceof Error && /connect|deadline|UNAVAILABLE|ECONNREFUSED|ENOTFOUND|EAI_AGAIN/i.test(err.message) && !/certificate|TLS|SSL|unauthenticated|permission/i.test(err.message)) {
    return `the Temporal frontend at ${address} to answer`;
  }
  return null;
}

/**
 * The connection options of the client and of the worker's native connection: the address, and
 * TLS (server CA, client certificate for mTLS, server name) and the API key when configured.
 */
export function temporalConnectionOptions(address: string, security: TemporalSecurity = {}): { address: string } & TemporalSecurity {
  return { address, ...(security.tls && { tls: security.tls }), ...(security.apiKey && { apiKey: security.apiKey }) };
}

/**
 * How long one try waits for a frontend that does not answer: the client's own 10 s, but with a
 * start-up wait at most half of what is left of its bound (at least 1 s), so such a frontend is
 * tried more than once and the bound holds (a 2 s bound used to take 10 s per try).
 */
export function connectDeadlineMs(wait: StartupWait | undefined, waitedMs: number): number {
  if (!wait) return CONNECT_TIMEOUT_MS;
  return Math.min(CONNECT_TIMEOUT_MS, Math.max(MIN_CONNECT_TIMEOUT_MS, Math.floor((wait.timeoutMs - waitedMs) / 2)));
}

/**
 * Opens the process's one Temporal client connection once the namespace exists, and makes sure
 * Synctide's search attributes exist in it before any workflow upserts them. With `wait`, a
 * server that does not answer yet or a namespace not registered yet (a compose or Kubernetes
 * start where Temporal's schema and namespace jobs still run) is retried every `retryMs` for at
 * most `timeoutMs`, each try logged with what it waits for; then the last error is thrown, naming
 * the bound. Any other failure (TLS, API key) is thrown at once.
 */
export async function connectTemporal(address: string, namespace: string, security: TemporalSecurity = {}, wait?: StartupWait): Promise<Client> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    let connection: Connection | undefined;
    try {
      connection = await Connection.connect({ ...temporalConnectionOptions(address, security), connectTimeout: connectDeadlineMs(wait, Date.now() - started) });
      await connection.workflowService.describeNamespace({ namespace });
      await ensureSearchAttributes(connection, namespace);
      const interceptors = temporalClientInterceptors();
      return new Client({ connection, namespace, ...(interceptors && { interceptors }) });
    } catch (err) {
      await connection?.close().catch(() => undefined);
      const reason = startupWaitReason(err, address, namespace);
      const waited = Date.now() - started;
      if (!wait || reason === null) throw err;
      if (waited >= wait.timeoutMs) {
        throw new Error(`gave up waiting for ${reason} after ${Math.round(waited / 1000)} s (TEMPORAL_STARTUP_WAIT_SECONDS): ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      }
      wait.logger?.warn({ attempt, waited_seconds: Math.round(waited / 1000), bound_seconds: Math.round(wait.timeoutMs / 1000) }, `waiting for ${reason}`);
      await sleep(Math.min(wait.retryMs ?? 2000, Math.max(0, wait.timeoutMs - waited)));
    }
  }
}
