import { isGrpcServiceError, type Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { SYNCTIDE_SEARCH_ATTRIBUTES } from '../temporal/search-attributes';

const GRPC_ALREADY_EXISTS = 6;
const GRPC_UNIMPLEMENTED = 12;

/**
 * Registers Synctide's search attributes with a namespace when they are missing. Upserting an
 * unknown attribute would fail workflow tasks forever, so every process checks this at start.
 */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<void> {
  let known: Record<string, unknown> = {};
  try {
    const existing = await connection.operatorService.listSearchAttributes({ namespace });
    known = { ...existing.customAttributes, ...existing.systemAttributes };
  } catch (err) {
    // The time-skipping test server implements adding search attributes but not listing them.
    if (!(isGrpcServiceError(err) && err.code === GRPC_UNIMPLEMENTED)) throw err;
  }
  const missing = SYNCTIDE_SEARCH_ATTRIBUTES.filter((key) => !(key.name in known));
  if (missing.length === 0) return;
  const searchAttributes = Object.fromEntries(
    missing.map((key) => [key.name, proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD]),
  );
  try {
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes });
  } catch (err) {
    // Another process registered them in the meantime.
    if (!(isGrpcServiceError(err) && err.code === GRPC_ALREADY_EXISTS)) throw err;
  }
}
