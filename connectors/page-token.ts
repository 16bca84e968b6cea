// A connector's page token: a JSON value carried as base64url text. Each connector checks the
// shape of its own tokens; this module only reads and writes the text.

/** `body` as a page token. */
export function encodePageToken(body: unknown): string {
  return Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
}

/** What page token `token` carries, or undefined when it is not base64url JSON. */
export function pageTokenBody(token: string): unknown {
  try {
    return JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}
