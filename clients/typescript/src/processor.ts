/**
 * Remote processors in TypeScript. A processor connects to agentwire, says which hooks it
 * serves, and answers each hook call. It is called only for agents whose config names its id
 * (`[processors.<id>] kind = "remote"`):
 *
 *     const guard = new Processor("word-guard").on("processInput", (call) =>
 *       call.text.includes("secret") ? abort("no secrets, please") : undefined,
 *     );
 *     await guard.run("127.0.0.1:50051");
 *
 * A handler returns `undefined` to let things pass, or one of `abort(...)`, `replace(...)`,
 * `drop()`, `retryApiCall()`. `call.state` is this processor's state for the run: change it in
 * place and it travels with the run, so instances stay stateless. The handler's `signal` aborts
 * when the server cancels the call (its run went away). The helper handles the handshake,
 * concurrent calls, pings, and reconnects with backoff (also after the server drains).
 *
 * With several replicas, give them all, or a DNS name that resolves to every one: the helper
 * keeps one session with each, resolves the name again every `resolveEveryMs`, and opens and
 * closes sessions as replicas come and go (runs execute on whichever replica a client reaches):
 *
 *     await guard.run(["10.0.0.5:50051", "10.0.0.6:50051"]);
 *     await guard.run("dns:///agentwire-headless.prod.svc:50051");
 *
 * A stream guard takes the answer's chunks in windows rather than one call per token:
 *
 *     guard.on("processOutputStream", (call) => replace({ parts: call.chunks.map(mask) }),
 *              { window: { maxChunks: 32, maxDelayMs: 50 } });
 *
 * Everything an in-process processor can do, a handler can (protocol version 2): `call.raw.steps`
 * are the steps so far, `call.raw.stepInput` the step's model call (tools, tool choice, settings,
 * provider options, output schema), `call.sources` where each message came from, and
 * `call.raw.taggedSystemMessages` the tagged system messages. `replace` may keep system messages
 * under a tag across steps, change every setting of a step, or answer in the model's place
 * (`response: [textDelta("cached")]`); `retryApiCall(messages)` repairs the messages first;
 * `{ dataParts: true }` lets a stream processor see custom `data-*` chunks; `call.emit(...)`
 * streams a custom chunk with the answer.
 *
 * The same connection executes tools agents call (declared as `[tools.<name>] kind = "remote"`,
 * `server` = this processor id):
 *
 *     tools.tool("weather", { description: "Weather by city", parameters: schema },
 *                async (args) => ({ city: args.city, temp: 21 }));   // throw: a tool error
 */
import { type JsonObject, type JsonValue, create, fromJson, isMessage, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";

import { type Chunk, ChunkSchema, type Message } from "./gen/agentwire/v1/agent_pb.js";
import {
  Hook,
  type HookCall,
  HookMode,
  type HookOptions,
  HookOptionsSchema,
  type HookResult,
  HookResultSchema,
  MessageSource,
  type ProcessorMessage,
  ProcessorMessageSchema,
  ProcessorService,
  type ReplacementSchema,
  type ToolInvocation,
  type ToolOutput,
  ToolOutputSchema,
  type ToolSpec,
  ToolSpecSchema,
  type Warning,
  WarningSchema,
} from "./gen/agentwire/v1/processor_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type TlsOptions, transportTo } from "./client.js";
import { AsyncQueue } from "./queue.js";
import { DNS_PREFIX, resolveTargets } from "./replicas.js";

/** The remote-processor protocol versions this package speaks, inclusive. */
export const MIN_PROTOCOL_VERSION = 1;
export const PROTOCOL_VERSION = 2;

/** Where a message of a run came from. */
export type Source = "memory" | "input" | "response" | "signal" | "unknown";

const SOURCE_NAMES = new Map<MessageSource, Source>([
  [MessageSource.MEMORY, "memory"],
  [MessageSource.INPUT, "input"],
  [MessageSource.RESPONSE, "response"],
  [MessageSource.SIGNAL, "signal"],
]);

/** The nine hooks, by their contract names. */
export const HOOKS = {
  processInput: Hook.PROCESS_INPUT,
  processInputStep: Hook.PROCESS_INPUT_STEP,
  processLLMRequest: Hook.PROCESS_LLM_REQUEST,
  processAPIError: Hook.PROCESS_API_ERROR,
  processOutputStream: Hook.PROCESS_OUTPUT_STREAM,
  processLLMResponse: Hook.PROCESS_LLM_RESPONSE,
  processOutputStep: Hook.PROCESS_OUTPUT_STEP,
  processToolResult: Hook.PROCESS_TOOL_RESULT,
  processOutputResult: Hook.PROCESS_OUTPUT_RESULT,
} as const;

export type HookName = keyof typeof HOOKS;

const HOOK_NAMES = new Map<Hook, HookName>(
  Object.entries(HOOKS).map(([name, hook]) => [hook, name as HookName]),
);

/**
 * processOutputStream in windows: a call carries up to `maxChunks` content chunks
 * (`call.chunks`), sent when full, `maxDelayMs` after its first chunk (0: no time bound), or when
 * the step's stream ends. The answer replaces the whole window.
 */
export interface Window {
  maxChunks: number;
  maxDelayMs: number;
}

/** How a hook is served. */
export interface HookServing {
  /** processOutputStream only: take chunks in windows. */
  window?: Window;
  /** Fire-and-forget: runs never wait for the handler, and its answer is ignored. */
  observe?: boolean;
  /** processOutputStream only: see custom `data-*` chunks too. */
  dataParts?: boolean;
}

/** One hook call: the raw `HookCall` plus conveniences. */
export class Call {
  readonly hook: HookName | "unknown";
  /** This processor's state for the run; change it in place to keep changes. */
  readonly state: JsonObject;

  constructor(readonly raw: HookCall) {
    this.hook = HOOK_NAMES.get(raw.hook) ?? "unknown";
    this.state = structuredClone(raw.state ?? {});
  }

  /** The text of the call's messages, joined with spaces. */
  get text(): string {
    return joinedText(this.raw.messages);
  }

  /** The text of the messages the client sent in this run, joined with spaces (not the remembered history). */
  get inputText(): string {
    return joinedText(this.inputMessages);
  }

  /** When the answer is due (the handler's signal aborts then). */
  get deadline(): Date {
    return new Date(Number(this.raw.deadlineUnixMs));
  }

  /** processOutputStream's chunk (one by one). */
  get part(): Chunk | undefined {
    return this.raw.part;
  }

  /** A window's chunks (windowed processOutputStream), or processLLMResponse's chunks. */
  get chunks(): Chunk[] {
    return this.raw.chunks;
  }

  /** Where each of `raw.messages` came from, in order. */
  get sources(): Source[] {
    return this.raw.messageSources.map((source) => SOURCE_NAMES.get(source) ?? "unknown");
  }

  /** The messages the client sent in this run (not the remembered ones). */
  get inputMessages(): Message[] {
    const sources = this.sources;
    return this.raw.messages.filter((_, index) => sources[index] === "input");
  }

  /** Custom chunks to stream with the answer (see `emit`). */
  readonly emitted: Chunk[] = [];

  /** What this call warned of (see `warn`). */
  readonly warnings: Warning[] = [];

  /**
   * Warns of what this call found without stopping the run: the client gets a transient
   * `data-<kind>` chunk with `details`, and the run's record keeps the warning (the console shows
   * it). `kind` is 1 to 64 lowercase letters, digits or dashes, e.g. `"pii"`.
   */
  warn(kind: string, message: string, details: JsonValue = null): void {
    if (!/^[a-z0-9-]{1,64}$/.test(kind)) {
      throw new Error(`warning kinds are 1 to 64 lowercase letters, digits or dashes, not ${JSON.stringify(kind)}`);
    }
    this.warnings.push(create(WarningSchema, { kind, message, details: fromJson(ValueSchema, details) }));
  }

  /** Streams a custom chunk (`type` starts with `data-`) with the answer; a non-transient one is kept with the run's answer. */
  emit(type: string, data: JsonValue, options: { id?: string; transient?: boolean } = {}): void {
    if (!type.startsWith("data-")) throw new Error(`custom chunk types start with "data-", not ${JSON.stringify(type)}`);
    this.emitted.push(
      create(ChunkSchema, {
        type,
        payload: {
          case: "data",
          value: { data: fromJson(ValueSchema, data), id: options.id ?? "", transient: options.transient ?? false },
        },
      }),
    );
  }
}

/** The text parts of `messages`, joined with spaces. */
function joinedText(messages: Message[]): string {
  return messages
    .flatMap((message) => message.parts)
    .flatMap((part) => (part.part.case === "text" ? [part.part.value.text] : []))
    .join(" ");
}

/** A text chunk, for `replace({ response })` or `replace({ parts })`. */
export function textDelta(text: string): Chunk {
  return create(ChunkSchema, { type: "text-delta", payload: { case: "textDelta", value: { text } } });
}

/** What a handler returns: `undefined` lets the call pass. */
export type Answer = HookResult | undefined | void;
export type Handler = (call: Call, signal: AbortSignal) => Answer | Promise<Answer>;

/** Stops the run with a tripwire (`retry` asks processOutputStep for another attempt). */
export function abort(reason: string, options: { retry?: boolean; metadata?: JsonValue } = {}): HookResult {
  const metadata = options.metadata === undefined ? undefined : fromJson(ValueSchema, options.metadata);
  return create(HookResultSchema, {
    outcome: { case: "abort", value: { reason, retry: options.retry ?? false, metadata } },
  });
}

/** Replaces what the hook allows. */
export function replace(replacement: {
  messages?: Message[];
  systemMessages?: string[];
  /** processOutputStream, one by one: the chunk. */
  part?: Chunk;
  /** Windowed processOutputStream: the chunks that replace the window. */
  parts?: Chunk[];
  toolResult?: JsonValue;
  model?: string;
  toolChoice?: string;
  activeTools?: string[];
  prompt?: Message[];
  /** System messages kept under a tag across steps (after emptying `clearSystemTags`). */
  taggedSystemMessages?: Record<string, string | string[]>;
  clearSystemTags?: string[];
  /** processLLMRequest: answer in the model's place; the model is not called. */
  response?: Chunk[];
  /** processInputStep: the step's tools, settings, provider options and output schema. */
  tools?: { name: string; description?: string; parameters?: JsonObject }[];
  modelSettings?: { temperature?: number; maxTokens?: number; topP?: number; stop?: string[]; seed?: bigint };
  providerOptions?: JsonObject;
  structuredOutput?: JsonObject;
}): HookResult {
  const value: MessageInitShape<typeof ReplacementSchema> = {
    part: replacement.part,
    model: replacement.model,
    toolChoice: replacement.toolChoice,
  };
  if (replacement.messages) value.messages = { messages: replacement.messages };
  if (replacement.systemMessages) value.systemMessages = { values: replacement.systemMessages };
  if (replacement.parts) value.parts = { chunks: replacement.parts };
  if (replacement.toolResult !== undefined) value.toolResult = fromJson(ValueSchema, replacement.toolResult);
  if (replacement.activeTools) value.activeTools = { values: replacement.activeTools };
  if (replacement.prompt) value.prompt = { messages: replacement.prompt };
  value.addTaggedSystemMessages = Object.entries(replacement.taggedSystemMessages ?? {}).flatMap(([tag, texts]) =>
    (typeof texts === "string" ? [texts] : texts).map((text) => ({ tag, text })),
  );
  value.clearSystemTags = replacement.clearSystemTags ?? [];
  if (replacement.response) value.response = { chunks: replacement.response };
  if (replacement.tools) {
    value.tools = {
      tools: replacement.tools.map((tool) => ({
        name: tool.name,
        description: tool.description ?? "",
        parameters: tool.parameters ?? { type: "object" },
      })),
    };
  }
  if (replacement.modelSettings) value.modelSettings = replacement.modelSettings;
  if (replacement.providerOptions) value.providerOptions = replacement.providerOptions;
  if (replacement.structuredOutput) value.structuredOutput = replacement.structuredOutput;
  return create(HookResultSchema, { outcome: { case: "replace", value } });
}

/** processOutputStream: drops the chunk, or the whole window. */
export function drop(): HookResult {
  return create(HookResultSchema, { outcome: { case: "drop", value: {} } });
}

/** processAPIError: calls the model again, with `messages` (repaired) when given. */
export function retryApiCall(messages?: Message[]): HookResult {
  const value = messages ? { messages: { messages } } : {};
  return create(HookResultSchema, { outcome: { case: "retryApiCall", value } });
}

/** Executes a tool: gets the (schema-checked) arguments, returns a JSON result; a throw is an error the model sees. */
export type ToolHandler = (args: JsonObject, signal: AbortSignal) => JsonValue | Promise<JsonValue>;

/** Statuses that mean "this session will never be accepted": not retried. */
const REFUSALS = new Set([
  Code.NotFound,
  Code.FailedPrecondition,
  Code.InvalidArgument,
  Code.Unauthenticated,
  Code.PermissionDenied,
]);

/** A remote processor: register handlers with `on`, then `run` (or `start` / `stop`). */
export class Processor {
  readonly instanceId: string;
  readonly token: string | undefined;
  readonly maxConcurrency: number;
  readonly tls: TlsOptions | boolean | undefined;
  private readonly log: (line: string) => void;
  readonly resolveEveryMs: number;
  /** Targets with a session now, and targets welcomed before (their next welcome reconnects). */
  private readonly connectedTargets = new Set<string>();
  private readonly welcomedTargets = new Set<string>();
  private readonly handlers = new Map<Hook, Handler>();
  private readonly options = new Map<Hook, HookOptions>();
  private readonly tools = new Map<string, { spec: ToolSpec; handler: ToolHandler }>();
  private stopping: AbortController | undefined;
  private running: Promise<void> | undefined;

  constructor(
    readonly processorId: string,
    options: {
      instanceId?: string;
      /** The processor token (default `$AGENTWIRE_PROCESSOR_TOKEN`), for servers with `[[processor_tokens]]`. */
      token?: string;
      maxConcurrency?: number;
      /** Connect over TLS (`true`: the system roots). */
      tls?: TlsOptions | boolean;
      /** Where the connect and reconnect lines go (default: stderr). */
      log?: (line: string) => void;
      /** How often a `dns:///` address is resolved again (default 30 s). */
      resolveEveryMs?: number;
    } = {},
  ) {
    this.instanceId = options.instanceId ?? `${processorId}-${Math.random().toString(16).slice(2, 10)}`;
    this.token = options.token ?? process.env.AGENTWIRE_PROCESSOR_TOKEN;
    this.maxConcurrency = options.maxConcurrency ?? 0;
    this.tls = options.tls;
    this.log = options.log ?? ((line) => console.error(line));
    this.resolveEveryMs = options.resolveEveryMs ?? 30_000;
  }

  /** The replicas (`host:port`) with a session now. */
  connected(): string[] {
    return [...this.connectedTargets].sort();
  }

  /** Serves `hook` (e.g. "processInput") with `handler`. */
  on(hook: HookName, handler: Handler, serving: HookServing = {}): this {
    const number = HOOKS[hook];
    if (number === undefined) throw new Error(`unknown hook ${JSON.stringify(hook)}`);
    if ((serving.window || serving.dataParts) && hook !== "processOutputStream") {
      throw new Error("only processOutputStream takes windows and data parts");
    }
    this.handlers.set(number, handler);
    if (serving.window || serving.observe || serving.dataParts) {
      this.options.set(
        number,
        create(HookOptionsSchema, {
          hook: number,
          mode: serving.observe ? HookMode.OBSERVE : HookMode.BLOCKING,
          window: serving.window,
          dataParts: serving.dataParts ?? false,
        }),
      );
    }
    return this;
  }

  /** Executes tool `name`; `parameters` is its JSON schema (default: any object). */
  tool(name: string, definition: { description?: string; parameters?: JsonObject }, handler: ToolHandler): this {
    const spec = create(ToolSpecSchema, {
      name,
      description: definition.description ?? "",
      parameters: definition.parameters ?? { type: "object" },
    });
    this.tools.set(name, { spec, handler });
    return this;
  }

  /**
   * One session: resolves when the server ends the stream (e.g. after a drain), rejects with a
   * `ConnectError` when it refuses or the connection fails. `onReady` runs once welcomed.
   */
  async serve(address: string, signal?: AbortSignal, onReady?: () => void): Promise<void> {
    return this.serveTo(address, undefined, signal, onReady);
  }

  /** `serve`, checking the server's certificate against `serverName` when given. */
  private async serveTo(
    address: string,
    serverName: string | undefined,
    signal?: AbortSignal,
    onReady?: () => void,
  ): Promise<void> {
    if (this.handlers.size === 0 && this.tools.size === 0) {
      throw new Error("register at least one hook with on(...) or a tool with tool(...)");
    }
    const client = createClient(ProcessorService, transportTo(address, undefined, { tls: this.tls, serverName }));
    const outgoing = new AsyncQueue<ProcessorMessage>();
    outgoing.push(
      create(ProcessorMessageSchema, {
        message: {
          case: "hello",
          value: {
            processorId: this.processorId,
            instanceId: this.instanceId,
            minProtocolVersion: MIN_PROTOCOL_VERSION,
            maxProtocolVersion: PROTOCOL_VERSION,
            hooks: [...this.handlers.keys()],
            maxConcurrency: this.maxConcurrency,
            hookOptions: [...this.options.values()],
            tools: [...this.tools.values()].map((tool) => tool.spec),
          },
        },
      }),
    );
    const headers = this.token ? { authorization: `Bearer ${this.token}` } : undefined;
    const calls = new Map<bigint, AbortController>();
    try {
      for await (const message of client.connect(outgoing, { signal, headers })) {
        switch (message.message.case) {
          case "welcome": {
            const again = this.welcomedTargets.has(address);
            this.welcomedTargets.add(address);
            this.connectedTargets.add(address);
            this.log(
              `agentwire: ${again ? "reconnected" : "connected"} as ${this.processorId} ` +
                `(instance ${this.instanceId}) to ${address}, protocol ${message.message.value.protocolVersion}`,
            );
            onReady?.();
            break;
          }
          case "ping":
            outgoing.push(
              create(ProcessorMessageSchema, { message: { case: "pong", value: { nonce: message.message.value.nonce } } }),
            );
            break;
          case "call": {
            const call = message.message.value;
            const cancelled = new AbortController();
            calls.set(call.callId, cancelled);
            // The handler's signal aborts at the call's deadline, or when the server cancels it.
            const left = Number(call.deadlineUnixMs) - Date.now();
            const signal = call.deadlineUnixMs > 0n ? AbortSignal.any([cancelled.signal, AbortSignal.timeout(Math.max(left, 0))]) : cancelled.signal;
            void this.answer(call, signal).then((result) => {
              calls.delete(call.callId);
              // A call cancelled by the server or by shutdown is never answered: a guardrail
              // interrupted mid-check must not be taken for a pass.
              if (cancelled.signal.aborted) return;
              outgoing.push(create(ProcessorMessageSchema, { message: { case: "result", value: result } }));
            });
            break;
          }
          case "toolCall": {
            const call = message.message.value;
            const cancelled = new AbortController();
            calls.set(call.callId, cancelled);
            void this.runTool(call, cancelled.signal).then((output) => {
              calls.delete(call.callId);
              if (cancelled.signal.aborted) return;
              outgoing.push(create(ProcessorMessageSchema, { message: { case: "toolResult", value: output } }));
            });
            break;
          }
          case "cancel":
            calls.get(message.message.value.callId)?.abort();
            calls.delete(message.message.value.callId);
            break;
          case "drain":
            // No new calls will come; the server closes the stream once ours are answered.
            break;
        }
      }
    } finally {
      this.connectedTargets.delete(address);
      for (const cancelled of calls.values()) cancelled.abort();
      outgoing.close();
    }
  }

  private async runTool(call: ToolInvocation, signal: AbortSignal): Promise<ToolOutput> {
    const tool = this.tools.get(call.toolName);
    try {
      if (!tool) throw new Error(`unknown tool ${call.toolName}`);
      const args = call.args ? (toJson(ValueSchema, call.args) as JsonObject) : {};
      const result = await tool.handler(args, signal);
      return create(ToolOutputSchema, { callId: call.callId, result: fromJson(ValueSchema, result ?? null) });
    } catch (error) {
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      return create(ToolOutputSchema, { callId: call.callId, error: message });
    }
  }

  private async answer(raw: HookCall, signal: AbortSignal): Promise<HookResult> {
    const call = new Call(raw);
    const before = JSON.stringify(call.state);
    let result: HookResult;
    try {
      const handler = this.handlers.get(raw.hook);
      const answer: unknown = (handler ? await handler(call, signal) : undefined) ?? create(HookResultSchema, {
        outcome: { case: "continue", value: {} },
      });
      if (!isMessage(answer, HookResultSchema)) {
        throw new TypeError(
          `the ${call.hook} handler returned ${typeof answer}; return undefined or the result of abort(), replace(), drop() or retryApiCall()`,
        );
      }
      result = answer;
    } catch (error) {
      // A handler bug fails the run clearly, never the session.
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      result = create(HookResultSchema, { outcome: { case: "failure", value: { message } } });
    }
    result.callId = raw.callId;
    result.emit.push(...call.emitted);
    result.warnings.push(...call.warnings);
    if (JSON.stringify(call.state) !== before) result.state = call.state;
    return result;
  }

  /**
   * Serves until `signal` aborts, one session per replica, each reconnected with backoff:
   * `address` is `host:port`, a list of them, or `dns:///name:port` for every address the name
   * resolves to (resolved again every `resolveEveryMs`). `onReady` runs once every replica of
   * the first resolution has welcomed it. Refusals (unknown id, bad token, bad version) end every
   * session and are thrown, not retried.
   */
  async run(
    address: string | readonly string[] = "127.0.0.1:50051",
    signal?: AbortSignal,
    onReady?: () => void,
  ): Promise<void> {
    const addresses = typeof address === "string" ? [address] : [...address];
    if (addresses.length === 0) throw new Error("give at least one address");
    const everything = new AbortController();
    const stopAll = () => everything.abort();
    signal?.addEventListener("abort", stopAll, { once: true });
    const sessions = new Map<string, { stop: AbortController; done: Promise<void> }>();
    let refused: unknown;
    let waiting: Set<string> | undefined;
    try {
      while (!everything.signal.aborted) {
        const targets = await resolveTargets(addresses, (line) => this.log(line));
        if (waiting === undefined && targets.size > 0) waiting = new Set(targets.keys());
        for (const [target, session] of sessions) {
          if (!targets.has(target)) {
            this.log(`agentwire: ${target} left the resolution; closing its session`);
            session.stop.abort();
            sessions.delete(target);
          }
        }
        for (const [target, serverName] of targets) {
          if (sessions.has(target)) continue;
          const stop = new AbortController();
          const ready = () => {
            if (waiting?.delete(target) && waiting.size === 0) onReady?.();
          };
          const done = this.runTarget(target, serverName, AbortSignal.any([stop.signal, everything.signal]), ready).catch(
            (error: unknown) => {
              refused ??= error;
              everything.abort();
            },
          );
          sessions.set(target, { stop, done });
        }
        if (!addresses.some((entry) => entry.startsWith(DNS_PREFIX))) {
          await sleep(Number.POSITIVE_INFINITY, everything.signal);
        } else {
          await sleep(this.resolveEveryMs, everything.signal);
        }
      }
    } finally {
      everything.abort();
      signal?.removeEventListener("abort", stopAll);
      await Promise.all([...sessions.values()].map((session) => session.done));
    }
    if (refused !== undefined) throw refused;
  }

  /** One replica's sessions, reconnected with backoff until `signal` aborts; refusals throw. */
  private async runTarget(
    address: string,
    serverName: string | undefined,
    signal: AbortSignal,
    onReady: () => void,
  ): Promise<void> {
    let backoff = 100;
    while (!signal.aborted) {
      try {
        await this.serveTo(address, serverName, signal, () => {
          backoff = 100;
          onReady?.();
        });
      } catch (error) {
        if (signal?.aborted) return;
        const connectError = ConnectError.from(error);
        if (REFUSALS.has(connectError.code)) throw connectError;
        console.warn(
          `agentwire: session of ${this.processorId} with ${address} ended (${connectError.message}); reconnecting in ${backoff} ms`,
        );
      }
      await sleep(backoff, signal);
      backoff = Math.min(backoff * 2, 5000);
    }
  }

  /** Serves in the background; resolves once connected to every replica `address` names. */
  start(address: string | readonly string[] = "127.0.0.1:50051", timeoutMs = 10_000): Promise<this> {
    this.stopping = new AbortController();
    const stopping = this.stopping;
    return new Promise((resolve, reject) => {
      // After the timeout, connected to some replicas is enough: the others keep being retried.
      const timer = setTimeout(() => {
        if (this.connectedTargets.size > 0) {
          this.log(`agentwire: ${this.processorId} is not connected to every replica yet; retrying in the background`);
          resolve(this);
        } else {
          reject(new Error(`processor ${this.processorId} did not connect to ${String(address)} in ${timeoutMs} ms`));
        }
      }, timeoutMs);
      this.running = this.run(address, stopping.signal, () => {
        clearTimeout(timer);
        resolve(this);
      }).catch((error: unknown) => {
        clearTimeout(timer);
        reject(error);
      });
    });
  }

  /** Ends every session and stops reconnecting. */
  async stop(): Promise<void> {
    this.stopping?.abort();
    await this.running;
  }
}

/** Waits `ms` (forever for `Infinity`), or until `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = Number.isFinite(ms) ? setTimeout(done, ms) : undefined;
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
