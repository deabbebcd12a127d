/**
 * agentwire: call agents, and serve processor hooks from TypeScript.
 *
 *     import { Client, Processor, abort } from "agentwire-sdk";
 */
export { Client, type ClientOptions, type ConnectionOptions, type RunOptions, type TlsOptions, transportTo } from "./client.js";
export {
  type Answer,
  Call,
  HOOKS,
  type Handler,
  type HookName,
  type HookServing,
  MIN_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
  Processor,
  type Source,
  type ToolHandler,
  type Window,
  abort,
  drop,
  replace,
  retryApiCall,
  textDelta,
} from "./processor.js";
export * from "./gen/agentwire/v1/agent_pb.js";
export * from "./gen/agentwire/v1/memory_pb.js";
export * from "./gen/agentwire/v1/processor_pb.js";
export * from "./gen/agentwire/v1/runs_pb.js";
