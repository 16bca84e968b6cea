// The typed Synctide client: `paths` (schema.d.ts) is generated from the API's OpenAPI document by
// `npm run client:generate` and checked in; CI regenerates it and fails on any difference. The
// runtime is openapi-fetch's fetch wrapper: a method per HTTP verb, typed by path, and
// `{ data, error, response }` answers (data on 2xx, the JSON error body otherwise).
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths } from './schema';

export type { components, operations, paths };
export type SynctideClient = Client<paths>;

export interface SynctideClientOptions extends Omit<ClientOptions, 'baseUrl' | 'headers'> {
  /** Where the API listens, e.g. `https://synctide.example.com` (no trailing path). */
  baseUrl: string;
  /** The admin key or a tenant key, sent as `Authorization: Bearer <apiKey>`. */
  apiKey: string;
  /** Further headers sent with every request (the key's `authorization` header wins). */
  headers?: Record<string, string>;
}

/** A client for every route of the document, each request carrying the key as a bearer token. */
export function createSynctideClient({ baseUrl, apiKey, headers, ...rest }: SynctideClientOptions): SynctideClient {
  return createClient<paths>({ ...rest, baseUrl, headers: { ...headers, authorization: `Bearer ${apiKey}` } });
}
