/**
 * Calls agents: `new Client(address).generate(...)` and `.stream(...)`.
 */
import { readFileSync } from "node:fs";

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
import { type ListRunsRequest, type RunRecord, RunService } from "./gen/agentwire/v1/runs_pb.js";

/** What a run request may carry besides the agent and the text. */
export type RunOptions = Partial<Omit<RunRequest, "$typeName" | "agentId" | "text">> & {
  /** Cancels the call (and so the run). */
  signal?: AbortSignal;
};

/**
 * TLS: `ca` is the PEM file of the CA that signed the server's certificate (unset: the system
 * roots); `cert` and `key`, this side's certificate for servers that require mTLS.
 */
export interface TlsOptions {
  ca?: string;
  cert?: string;
  key?: string;
}

/** How to reach a server. */
export interface ConnectionOptions {
  /** Connect over TLS (`true`: the system roots). Default: plaintext, unless the address is `https://…`. */
  tls?: TlsOptions | boolean;
  /** The name the server's TLS certificate must carry, when the address is one of its IPs. */
  serverName?: string;
}

/** What a `Client` takes besides the address. */
export interface ClientOptions extends ConnectionOptions {
  /** Sent as `authorization: Bearer <key>` with every call (default `$AGENTWIRE_API_KEY`). */
  apiKey?: string;
}

/**
 * A gRPC transport to `address` (`host:port`, or a URL), over HTTP/2 as gRPC requires. With
 * `apiKey`, every call carries `authorization: Bearer <key>` (for servers with `[auth]` keys);
 * with `tls`, the connection is TLS.
 */
export function transportTo(address: string, apiKey?: string, options: ConnectionOptions = {}): Transport {
  const tls = options.tls === true ? {} : options.tls || undefined;
  const host = address.replace(/^https?:\/\//, "");
  const secure = tls !== undefined || address.startsWith("https://");
  const baseUrl = `${secure ? "https" : "http"}://${host}`;
  if (tls && (tls.cert === undefined) !== (tls.key === undefined)) {
    throw new Error("tls: give both cert and key for a client certificate, or neither");
  }
  const read = (path?: string) => (path === undefined ? undefined : readFileSync(path));
  const withKey: Interceptor = (next) => (request) => {
    request.header.set("authorization", `Bearer ${apiKey}`);
    return next(request);
  };
  return createGrpcTransport({
    baseUrl,
    interceptors: apiKey ? [withKey] : [],
    nodeOptions: tls
      ? { ca: read(tls.ca), cert: read(tls.cert), key: read(tls.key), servername: options.serverName }
      : undefined,
  });
}

/** A connection to an agentwire server. */
export class Client {
  readonly agents: ServiceClient<typeof AgentService>;
  readonly memory: ServiceClient<typeof MemoryService>;
  readonly processors: ServiceClient<typeof ProcessorService>;
  /** Run records: how each run ended and its timeline (see `allRuns`, `getRun`). */
  readonly runs: ServiceClient<typeof RunService>;

  /**
   * `options.apiKey` (or a key as the second argument) defaults to `$AGENTWIRE_API_KEY`; none
   * when unset or empty. `options.tls` connects over TLS.
   */
  constructor(address = "127.0.0.1:50051", options: ClientOptions | string = {}) {
    const { apiKey = process.env.AGENTWIRE_API_KEY, tls } = typeof options === "string" ? { apiKey: options } : options;
    const transport = transportTo(address, apiKey || undefined, { tls });
    this.agents = createClient(AgentService, transport);
    this.memory = createClient(MemoryService, transport);
    this.processors = createClient(ProcessorService, transport);
    this.runs = createClient(RunService, transport);
  }

  /**
   * The run records `filter` selects, newest first and without their timelines, page after page
   * until the last. A key that is not an admin key names a resource.
   */
  async *allRuns(filter: Partial<Omit<ListRunsRequest, "pageToken" | "$typeName">> = {}): AsyncIterable<RunRecord> {
    let pageToken = "";
    do {
      const page = await this.runs.listRuns({ ...filter, pageToken });
      yield* page.runs;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** One run's record with its whole timeline (NotFound until the server has written it). */
  getRun(runId: string): Promise<RunRecord> {
    return this.runs.getRun({ runId });
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
