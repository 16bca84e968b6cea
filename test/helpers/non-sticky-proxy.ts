import * as grpc from '@grpc/grpc-js';
import { temporal } from '@temporalio/proto';

const SERVICE = 'temporal.api.workflowservice.v1.WorkflowService';
/** Headers the proxy's own client sets; forwarding the caller's would duplicate them. */
const TRANSPORT_HEADERS = ['content-type', 'user-agent', 'te', 'grpc-timeout', 'grpc-encoding', 'grpc-accept-encoding', 'host'];
const UNLIMITED = { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 };

const asIs = (bytes: Buffer): Buffer => bytes;

/** A workflow-task completion without its sticky attributes: the next task goes to the shared queue. */
function withoutStickiness(bytes: Buffer): Buffer {
  const Request = temporal.api.workflowservice.v1.RespondWorkflowTaskCompletedRequest;
  const request = Request.decode(bytes);
  if (!request.stickyAttributes) return bytes;
  request.stickyAttributes = null;
  return Buffer.from(Request.encode(request).finish());
}

/** A running proxy: point a worker's connection at `address`. */
export interface NonStickyProxy {
  address: string;
  close(): Promise<void>;
}

/**
 * A gRPC proxy in front of a Temporal server that forwards every WorkflowService call unchanged
 * except workflow-task completions, whose sticky attributes it drops. A real server moves the
 * tasks queued for a stopped worker's sticky queue back to the shared queue after a few seconds;
 * the time-skipping server never does, so a worker restarted against it strands every workflow it
 * had cached. Behind this proxy no workflow is ever sticky: each workflow task carries the full
 * history to whichever worker polls it, and a restarted worker replays from it. Workers keep their
 * cache (local activities need it); only the server's routing changes.
 */
export async function startNonStickyProxy(upstream: string): Promise<NonStickyProxy> {
  const client = new grpc.Client(upstream, grpc.credentials.createInsecure(), UNLIMITED);
  const server = new grpc.Server(UNLIMITED);
  // At run time the generated service is a protobufjs reflection object listing its methods.
  const service = temporal.api.workflowservice.v1.WorkflowService as unknown as { methods: Record<string, unknown> };
  for (const name of Object.keys(service.methods)) {
    const path = `/${SERVICE}/${name}`;
    const rewrite = name === 'RespondWorkflowTaskCompleted' ? withoutStickiness : asIs;
    const forward: grpc.handleUnaryCall<Buffer, Buffer> = (call, callback) => {
      const metadata = call.metadata.clone();
      for (const header of TRANSPORT_HEADERS) metadata.remove(header);
      client.makeUnaryRequest(path, asIs, asIs, rewrite(call.request), metadata, { deadline: call.getDeadline() }, (err, reply) =>
        err ? callback(err) : callback(null, reply),
      );
    };
    server.register(path, forward, asIs, asIs, 'unary');
  }
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
  return {
    address: `127.0.0.1:${port}`,
    close: async () => {
      server.forceShutdown();
      client.close();
    },
  };
}
