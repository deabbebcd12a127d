/**
 * Calls agents: `new Client(address).generate(...)` and `.stream(...)`.
 */
import { create } from "@bufbuild/protobuf";
import { type Interceptor, type Client as ServiceClient, type Transport, createClient } from "@connectrpc/connect";
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

/**
 * A gRPC transport to `address` (`host:port`, or a URL), over HTTP/2 as gRPC requires. With
 * `apiKey`, every call carries `authorization: Bearer <key>` (for servers with `[auth]` keys).
 */
export function transportTo(address: string, apiKey?: string): Transport {
  const baseUrl = /^https?:\/\//.test(address) ? address : `http://${address}`;
  const withKey: Interceptor = (next) => (request) => {
    request.header.set("authorization", `Bearer ${apiKey}`);
    return next(request);
  };
  return createGrpcTransport({ baseUrl, interceptors: apiKey ? [withKey] : [] });
}

/** A connection to an agentwire server. */
export class Client {
  readonly agents: ServiceClient<typeof AgentService>;
  readonly memory: ServiceClient<typeof MemoryService>;
  readonly processors: ServiceClient<typeof ProcessorService>;

  /** `apiKey` defaults to `$AGENTWIRE_API_KEY`; none when unset or empty. */
  constructor(address = "127.0.0.1:50051", apiKey: string | undefined = process.env.AGENTWIRE_API_KEY) {
    const transport = transportTo(address, apiKey || undefined);
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
