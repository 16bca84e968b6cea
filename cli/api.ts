// The typed client (clients/typescript) as the commands use it: every call answers its data or
// throws a CliError carrying the exit code of the answer's status.
import { createSynctideClient, type SynctideClient } from '../clients/typescript';
import { apiError, CliError, EXIT, UnreachableError } from './errors';
import type { Settings } from './config';

export type { SynctideClient };

/**
 * A client for `settings`, each request naming the CLI in its user agent and dropped when `signal`
 * aborts (Ctrl-C), so no request in flight outlasts the first Ctrl-C.
 */
export function clientFor(settings: Settings, version: string, signal?: AbortSignal): SynctideClient {
  return createSynctideClient({ baseUrl: settings.url, apiKey: settings.apiKey, headers: { 'user-agent': `synctide-cli/${version}` }, ...(signal && { signal }) });
}

/**
 * The data of a successful answer; an error answer, an unreachable API (UnreachableError), an answer that is not JSON
 * or a request dropped by Ctrl-C (exit 130) as a CliError. An error names only the origin of `baseUrl` (scheme, host,
 * port), never the URL as configured.
 */
export async function answer<T>(baseUrl: string, request: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let result: { data?: T; error?: unknown; response: Response };
  try {
    result = await request;
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw new CliError('interrupted', EXIT.interrupted, 'interrupted');
    // Reached, but what answered is no API (a web server's page at that URL, say).
    if (err instanceof SyntaxError) throw new CliError(`the answer of ${new URL(baseUrl).origin} is not JSON: is it the Synctide API's URL?`, EXIT.failure);
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new UnreachableError(new URL(baseUrl).origin, cause?.code ?? cause?.message ?? (err as Error).message);
  }
  if (!result.response.ok) throw apiError(result.response.status, result.error);
  return result.data as T;
}
