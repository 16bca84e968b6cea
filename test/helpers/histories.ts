import fs from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';

/** Where recorded workflow histories live; test/replay.test.ts replays every one of them. */
export const HISTORIES_DIR = fileURLToPath(new URL('../histories/', import.meta.url));

const { History } = proto.temporal.api.history.v1;

/**
 * With RECORD_HISTORIES=1, saves the history of one workflow run as test/histories/<name>.binpb
 * (the protobuf encoding: exact, and independent of the JSON helpers, which trip over two copies
 * of protobufjs in this install), so later code changes are replayed against it.
 */
export async function recordHistory(client: Client, name: string, workflowId: string, runId?: string): Promise<void> {
  if (!process.env.RECORD_HISTORIES) return;
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  await fs.mkdir(HISTORIES_DIR, { recursive: true });
  await fs.writeFile(`${HISTORIES_DIR}${name}.binpb`, History.encode(History.fromObject(history)).finish());
}

/** Reads every recorded history. */
export async function loadHistories(): Promise<{ workflowId: string; history: proto.temporal.api.history.v1.History }[]> {
  const files = (await fs.readdir(HISTORIES_DIR)).filter((f) => f.endsWith('.binpb')).sort();
  return Promise.all(
    files.map(async (file) => ({
      workflowId: file.replace(/\.binpb$/, ''),
      history: History.decode(await fs.readFile(`${HISTORIES_DIR}${file}`)),
    })),
  );
}

/** The ids of a history's patch markers (the patched() calls that answered true), in order. */
export function patchIds(events: proto.temporal.api.history.v1.IHistoryEvent[]): string[] {
  return events
    .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch')
    .flatMap((e) => Object.values(e.markerRecordedEventAttributes?.details ?? {}))
    .flatMap((p) => (p.payloads ?? []).map((x) => (JSON.parse(Buffer.from(x.data ?? []).toString('utf8')) as { id: string }).id));
}
