import type { RequestIdVariables } from 'hono/request-id';
import type { Logger } from '../lib/logger';

/** Hono environment of the Synctide API: per-request id and logger. */
export type ApiEnv = { Variables: RequestIdVariables & { log: Logger } };
