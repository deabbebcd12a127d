/**
 * Calls agents: `new Client(address).generate(...)` and `.stream(...)`.
 */
import { create } from "@bufbuild/protobuf";
import { type Client as ServiceClient, type Transport, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import {
  AgentService,
  type Chunk,
  type GenerateResponse,
  type RunRequest,
  RunRequestSchema,
} from "./gen/agentwire/v1/agent_pb.js";
import { MemoryService } from "./gen/agentwire/v1/memory_pb.js";
import { ProcessorService } from "./gen/agentwire/v1/processor_pb.js";

/** What a run request may carry besides the agent and the text. */
export type RunOptions = Partial<Omit<RunRequest, "$typeName" | "agentId" | "text">> & {
  /** Cancels the call (and so the run). */
  signal?: AbortSignal;
};

/** A gRPC transport to `address` (`host:port`, or a URL), over HTTP/2 as gRPC requires. */
export function transportTo(address: string): Transport {
  const baseUrl = /^https?:\/\//.test(address) ? address : `http://${address}`;
  return createGrpcTransport({ baseUrl });
}

/** A connection to an agentwire server. */
export class Client {
  readonly agents: ServiceClient<typeof AgentService>;
  readonly memory: ServiceClient<typeof MemoryService>;
  readonly processors: ServiceClient<typeof ProcessorService>;

  constructor(address = "127.0.0.1:50051") {
    const transport = transportTo(address);
    this.agents = createClient(AgentService, transport);
    this.memory = createClient(MemoryService, transport);
    this.processors = createClient(ProcessorService, transport);
  }

  /** Runs an agent to the end; `result.tripwire` is set when a processor aborted. */
  generate(agentId: string, text: string, options: RunOptions = {}): Promise<GenerateResponse> {
    const { signal, ...fields } = options;
    return this.agents.generate(create(RunRequestSchema, { ...fields, agentId, text }), { signal });
  }

  /** Runs an agent and yields its chunks as they come. */
  stream(agentId: string, text: string, options: RunOptions = {}): AsyncIterable<Chunk> {
    const { signal, ...fields } = options;
    return this.agents.stream(create(RunRequestSchema, { ...fields, agentId, text }), { signal });
  }
}
