"""Remote processors in Python.

A processor connects to agentwire, says which hooks it serves, and answers each hook call. It is
called only for agents whose config names its id (`[processors.<id>] kind = "remote"`):

    from agentwire import Processor, abort

    guard = Processor("word-guard")

    @guard.on("processInput")
    def no_secrets(call):
        if "secret" in call.text:
            return abort("no secrets, please")

    guard.run("127.0.0.1:50051")

A handler returns None to let things pass, or one of `abort(...)`, `replace(...)`, `drop()`,
`retry_api_call()`. `call.state` is this processor's state for the run: change it in place and it
travels with the run, so instances stay stateless. The helper handles the handshake, concurrent
calls, and reconnects with backoff (also after the server drains on shutdown).

With several replicas, give every address, or a DNS name that resolves to all of them: the helper
keeps one session with each, re-resolves the name every `resolve_every` seconds, and opens and
closes sessions as replicas come and go (runs execute on whichever replica a client reaches, so
a guardrail must be connected to every one):

    guard.run(["10.0.0.5:50051", "10.0.0.6:50051"])
    guard.run("dns:///agentwire-headless.prod.svc:50051")

A stream guard can take the answer's chunks in windows instead of one call per token:

    @guard.on("processOutputStream", window=Window(max_chunks=32, max_delay_ms=50))
    def scan(call):          # call.chunks: the window's content chunks, in order
        return replace(parts=[mask(chunk) for chunk in call.chunks])

`observe=True` makes a hook fire-and-forget: the run never waits for it (audit, logging), and
`data_parts=True` lets a stream processor see custom `data-*` chunks too.

Everything an in-process processor can do, a handler can (protocol version 2): `call.steps` are
the steps so far, `call.step_input` the step's model call (tools, tool choice, settings, provider
options, output schema), `call.sources` where each message came from (`"memory"`, `"input"`,
`"response"`, `"signal"`), `call.tagged_system_messages` the tagged system messages. A
replacement may keep system messages under a tag across steps (`tagged_system_messages=`), change
every setting of a step (`tools=`, `model_settings=`, `provider_options=`,
`structured_output=`), or answer in the model's place (`response=[text_delta("cached")]`);
`retry_api_call(messages=[...])` repairs the messages before the retry.

The same connection serves tools that agents call (declared as `[tools.<name>] kind = "remote"`,
`server` = this processor id):

    @guard.tool("weather", "Weather by city", {"type": "object", "properties": {"city": {"type": "string"}}})
    def weather(args):
        return {"city": args["city"], "temp": 21}   # raise to report an error to the model
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import queue
import re
import threading
import time
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Union

import grpc
from google.protobuf import json_format

from agentwire.tls import TLSOption, channel_to
from agentwire.v1 import agent_pb2, processor_pb2, processor_pb2_grpc

log = logging.getLogger("agentwire.processor")


def _show_connection_lines() -> None:
    """Shows the connect and reconnect lines on stderr when the application configured no
    logging at all (with logging configured, they go where it says, at INFO)."""
    if not logging.getLogger().handlers and not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("agentwire: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable

HOOKS: Dict[str, int] = {
    "processInput": processor_pb2.HOOK_PROCESS_INPUT,
    "processInputStep": processor_pb2.HOOK_PROCESS_INPUT_STEP,
    "processLLMRequest": processor_pb2.HOOK_PROCESS_LLM_REQUEST,
    "processAPIError": processor_pb2.HOOK_PROCESS_API_ERROR,
    "processOutputStream": processor_pb2.HOOK_PROCESS_OUTPUT_STREAM,
    "processLLMResponse": processor_pb2.HOOK_PROCESS_LLM_RESPONSE,
    "processOutputStep": processor_pb2.HOOK_PROCESS_OUTPUT_STEP,
    "processToolResult": processor_pb2.HOOK_PROCESS_TOOL_RESULT,
    "processOutputResult": processor_pb2.HOOK_PROCESS_OUTPUT_RESULT,
}
_HOOK_NAMES = {number: name for name, number in HOOKS.items()}

# Answers of the server that retrying cannot change.
_REFUSALS = (
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
)

# The prefix of an address to resolve to all its replicas.
_DNS = "dns:///"


def _resolve(addresses: Sequence[str]) -> Dict[str, Optional[str]]:
    """The targets to keep a session with, each with the name TLS checks its certificate
    against (a `dns:///` name's addresses keep the name; other addresses as given). A name that
    does not resolve now contributes nothing until it does."""
    targets: Dict[str, Optional[str]] = {}
    for address in addresses:
        if not address.startswith(_DNS):
            targets[address] = None
            continue
        host, _, port = address[len(_DNS):].rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{address!r}: expected dns:///name:port")
        try:
            infos = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)
        except socket.gaierror as error:
            log.warning("%s does not resolve (%s); trying again later", host, error)
            continue
        for family, _, _, _, sockaddr in infos:
            ip = sockaddr[0]
            targets[f"[{ip}]:{port}" if family == socket.AF_INET6 else f"{ip}:{port}"] = host
    return targets


# What the server accepts as a warning's kind.
_WARNING_KIND = re.compile(r"[a-z0-9-]{1,64}")

# The protocol versions this helper speaks, inclusive.
MIN_PROTOCOL_VERSION = 1
PROTOCOL_VERSION = 2

_SOURCES = {
    processor_pb2.MESSAGE_SOURCE_MEMORY: "memory",
    processor_pb2.MESSAGE_SOURCE_INPUT: "input",
    processor_pb2.MESSAGE_SOURCE_RESPONSE: "response",
    processor_pb2.MESSAGE_SOURCE_SIGNAL: "signal",
}


@dataclass(frozen=True)
class Window:
    """processOutputStream in windows: a call carries up to `max_chunks` chunks (`call.chunks`),
    sent when full, `max_delay_ms` after its first chunk (0: no time bound), or when the step's
    stream ends. The answer replaces the whole window: `replace(parts=[...])`, `drop()`, or None
    to keep it."""

    max_chunks: int = 32
    max_delay_ms: int = 50


class Call:
    """One hook call: the raw `HookCall` plus conveniences."""

    def __init__(self, raw: processor_pb2.HookCall) -> None:
        self.raw = raw
        self.hook = _HOOK_NAMES.get(raw.hook, "unknown")
        self.state: Dict[str, Any] = json_format.MessageToDict(raw.state) if raw.HasField("state") else {}
        self.emitted: List[agent_pb2.Chunk] = []
        self.warnings: List[processor_pb2.Warning] = []

    def warn(self, kind: str, message: str, details: Any = None) -> None:
        """Warns of what this call found without stopping the run: the client gets a transient
        `data-<kind>` chunk with `details`, and the run's record keeps the warning (the console
        shows it). `kind` is lowercase letters, digits and dashes, e.g. `"pii"`."""
        if not _WARNING_KIND.fullmatch(kind):
            raise ValueError(f"warning kinds are 1 to 64 lowercase letters, digits or dashes, not {kind!r}")
        warning = processor_pb2.Warning(kind=kind, message=message)
        json_format.ParseDict(details, warning.details)
        self.warnings.append(warning)

    def emit(self, type: str, data: Any, id: str = "", transient: bool = False) -> None:
        """Streams a custom chunk (`type` starts with `data-`) with the answer to this call;
        a non-transient one is kept with the run's answer."""
        if not type.startswith("data-"):
            raise ValueError(f"custom chunk types start with 'data-', not {type!r}")
        chunk = agent_pb2.Chunk(type=type, data=agent_pb2.DataPayload(id=id, transient=transient))
        json_format.ParseDict(data, chunk.data.data)
        self.emitted.append(chunk)

    @property
    def text(self) -> str:
        """The text of the call's messages, joined with spaces."""
        return _joined_text(self.raw.messages)

    @property
    def deadline(self) -> float:
        """When the answer is due, in seconds since the epoch (like `time.time()`)."""
        return self.raw.deadline_unix_ms / 1000

    @property
    def input_text(self) -> str:
        """The text of the messages the client sent in this run, joined with spaces (not the
        remembered history: what a guard of the user's input checks)."""
        return _joined_text(self.input_messages)

    @property
    def part(self) -> Optional[agent_pb2.Chunk]:
        """processOutputStream's chunk."""
        return self.raw.part if self.raw.HasField("part") else None

    @property
    def sources(self) -> List[str]:
        """Where each of `messages` came from, in order: "memory", "input", "response" or "signal"."""
        return [_SOURCES.get(source, "unknown") for source in self.raw.message_sources]

    @property
    def input_messages(self) -> List[agent_pb2.Message]:
        """The messages the client sent in this run (not the remembered ones)."""
        return [message for message, source in zip(self.raw.messages, self.sources) if source == "input"]

    @property
    def step_input(self) -> Optional[processor_pb2.StepInput]:
        """processInputStep / processLLMRequest: the step's model call."""
        return self.raw.step_input if self.raw.HasField("step_input") else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def abort(reason: str, retry: bool = False, metadata: Any = None) -> processor_pb2.HookResult:
    """Stops the run with a tripwire (`retry` asks processOutputStep for another attempt)."""
    result = processor_pb2.HookResult(abort=processor_pb2.Abort(reason=reason, retry=retry))
    if metadata is not None:
        json_format.ParseDict(metadata, result.abort.metadata)
    return result


def _joined_text(messages: Iterable[agent_pb2.Message]) -> str:
    """The text parts of `messages`, joined with spaces."""
    return " ".join(part.text.text for message in messages for part in message.parts if part.HasField("text"))


def text_delta(text: str) -> agent_pb2.Chunk:
    """A text chunk, e.g. for `replace(response=[...])` or `replace(parts=[...])`."""
    return agent_pb2.Chunk(type="text-delta", text_delta=agent_pb2.DeltaPayload(text=text))


def replace(
    messages: Optional[Iterable[agent_pb2.Message]] = None,
    system_messages: Optional[Iterable[str]] = None,
    part: Optional[agent_pb2.Chunk] = None,
    tool_result: Any = None,
    parts: Optional[Iterable[agent_pb2.Chunk]] = None,
    tagged_system_messages: Optional[Mapping[str, Union[str, Iterable[str]]]] = None,
    clear_system_tags: Optional[Iterable[str]] = None,
    response: Optional[Iterable[agent_pb2.Chunk]] = None,
    tools: Optional[Iterable[Mapping[str, Any]]] = None,
    model_settings: Optional[Mapping[str, Any]] = None,
    provider_options: Optional[Mapping[str, Any]] = None,
    structured_output: Optional[Mapping[str, Any]] = None,
    **step: Any,
) -> processor_pb2.HookResult:
    """Replaces what the hook allows: messages, system messages, the chunk, a window's chunks
    (`parts`), the tool result; system messages kept under a tag across steps
    (`tagged_system_messages={"policy": "..."}`, after emptying `clear_system_tags`);
    processLLMRequest's answer in the model's place (`response`); processInputStep's `model`,
    `tool_choice`, `active_tools`, `tools` (dicts with name, description, parameters),
    `model_settings` (temperature, max_tokens, top_p, stop, seed), `provider_options` and
    `structured_output` (a JSON schema)."""
    replacement = processor_pb2.Replacement()
    for tag, texts in (tagged_system_messages or {}).items():
        for text in [texts] if isinstance(texts, str) else texts:
            replacement.add_tagged_system_messages.add(tag=tag, text=text)
    replacement.clear_system_tags.extend(clear_system_tags or [])
    # A list given empty is still a replacement (every message dropped): mark it present.
    if response is not None:
        replacement.response.SetInParent()
        replacement.response.chunks.extend(response)
    if tools is not None:
        for tool in tools:
            spec = replacement.tools.tools.add(name=tool["name"], description=tool.get("description", ""))
            json_format.ParseDict(tool.get("parameters", {"type": "object"}), spec.parameters)
    if model_settings is not None:
        json_format.ParseDict(model_settings, replacement.model_settings)
    if provider_options is not None:
        json_format.ParseDict(provider_options, replacement.provider_options)
    if structured_output is not None:
        json_format.ParseDict(structured_output, replacement.structured_output)
    if parts is not None:
        replacement.parts.SetInParent()
        replacement.parts.chunks.extend(parts)
    if messages is not None:
        replacement.messages.SetInParent()
        replacement.messages.messages.extend(messages)
    if system_messages is not None:
        replacement.system_messages.SetInParent()
        replacement.system_messages.values.extend(system_messages)
    if part is not None:
        replacement.part.CopyFrom(part)
    if tool_result is not None:
        json_format.ParseDict(tool_result, replacement.tool_result)
    if "model" in step:
        replacement.model = step["model"]
    if "tool_choice" in step:
        replacement.tool_choice = step["tool_choice"]
    if "active_tools" in step:
        replacement.active_tools.SetInParent()
        replacement.active_tools.values.extend(step["active_tools"])
    return processor_pb2.HookResult(replace=replacement)


def drop() -> processor_pb2.HookResult:
    """processOutputStream: drops the chunk."""
    return processor_pb2.HookResult(drop=processor_pb2.Drop())


def retry_api_call(messages: Optional[Iterable[agent_pb2.Message]] = None) -> processor_pb2.HookResult:
    """processAPIError: calls the model again, with `messages` (repaired) when given."""
    retry = processor_pb2.RetryApiCall()
    if messages is not None:
        retry.messages.messages.extend(messages)
    return processor_pb2.HookResult(retry_api_call=retry)


Handler = Callable[[Call], Optional[processor_pb2.HookResult]]



class Backoff:
    """The wait before reconnecting: 0.1 s after a session the server welcomed (a restarted
    server gets its processors back at once), doubling up to 5 s while sessions keep failing
    before their welcome."""

    def __init__(self) -> None:
        self._last = 0.0

    def after(self, welcomed: bool) -> float:
        """The wait after a session that was welcomed or not, in seconds."""
        self._last = 0.1 if welcomed or self._last == 0.0 else min(self._last * 2, 5.0)
        return self._last

class Processor:
    """A remote processor: register handlers with `on`, then `run` (blocking) or `start`."""

    def __init__(
        self,
        processor_id: str,
        instance_id: Optional[str] = None,
        max_concurrency: int = 16,
        token: Optional[str] = None,
        tls: TLSOption = None,
        resolve_every: float = 30.0,
    ) -> None:
        """`token`: the processor token, when the server requires one (default: the
        `AGENTWIRE_PROCESSOR_TOKEN` environment variable). `tls`: connect over TLS (`True`: the
        system roots, or `TLS(ca=..., cert=..., key=...)`). `resolve_every`: seconds between two
        resolutions of a `dns:///` address."""
        self.processor_id = processor_id
        self.tls = tls
        self.token = token if token is not None else os.environ.get("AGENTWIRE_PROCESSOR_TOKEN")
        self.instance_id = instance_id or f"{processor_id}-{uuid.uuid4().hex[:8]}"
        self.max_concurrency = max_concurrency
        self.handlers: Dict[str, Handler] = {}
        self.options: Dict[str, processor_pb2.HookOptions] = {}
        self.tools: Dict[str, Callable[[Dict[str, Any]], Any]] = {}
        self.tool_specs: Dict[str, processor_pb2.ToolSpec] = {}
        self.resolve_every = resolve_every
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        # By target (`host:port` as connected): whether its session is up, its channel, and the
        # event that ends its worker (set when the target leaves the resolution, or on stop).
        self._connected: Set[str] = set()
        self._channels: Dict[str, grpc.Channel] = {}
        self._leaving: Dict[str, threading.Event] = {}
        self._workers: List[threading.Thread] = []
        self._refused: Optional[grpc.RpcError] = None
        # Targets welcomed at least once (their next welcome is a reconnection).
        self._welcomed: Set[str] = set()
        self._thread: Optional[threading.Thread] = None

    def on(
        self, hook: str, window: Optional[Window] = None, observe: bool = False, data_parts: bool = False
    ) -> Callable[[Handler], Handler]:
        """Decorator: serves `hook` (e.g. "processInput") with the function; `window` takes
        processOutputStream chunks in windows; `observe` makes the hook fire-and-forget;
        `data_parts` lets processOutputStream see custom `data-*` chunks too."""
        if hook not in HOOKS:
            raise ValueError(f"unknown hook {hook!r}; expected one of {sorted(HOOKS)}")
        if (window is not None or data_parts) and hook != "processOutputStream":
            raise ValueError("only processOutputStream takes windows and data parts")

        def register(handler: Handler) -> Handler:
            self.handlers[hook] = handler
            if window is not None or observe or data_parts:
                options = processor_pb2.HookOptions(
                    hook=HOOKS[hook],
                    mode=processor_pb2.HOOK_MODE_OBSERVE if observe else processor_pb2.HOOK_MODE_BLOCKING,
                    data_parts=data_parts,
                )
                if window is not None:
                    options.window.max_chunks = window.max_chunks
                    options.window.max_delay_ms = window.max_delay_ms
                self.options[hook] = options
            return handler

        return register

    def tool(self, name: str, description: str = "", parameters: Optional[Dict[str, Any]] = None) -> Callable:
        """Decorator: executes tool `name` with the function, which gets the (schema-checked)
        arguments as a dict and returns a JSON-able result; an exception becomes a tool error the
        model sees."""

        def register(function: Callable[[Dict[str, Any]], Any]) -> Callable[[Dict[str, Any]], Any]:
            spec = processor_pb2.ToolSpec(name=name, description=description or (function.__doc__ or "").strip())
            json_format.ParseDict(parameters or {"type": "object"}, spec.parameters)
            self.tools[name] = function
            self.tool_specs[name] = spec
            return function

        return register

    def _run_tool(self, raw: processor_pb2.ToolInvocation) -> processor_pb2.ToolOutput:
        output = processor_pb2.ToolOutput(call_id=raw.call_id)
        try:
            args = json_format.MessageToDict(raw.args) if raw.HasField("args") else {}
            result = self.tools[raw.tool_name](args)
            if inspect.isawaitable(result):  # an `async def` tool
                result = asyncio.run(_awaited(result))
            json_format.ParseDict(result, output.result)
        except Exception as error:  # the model sees the error; the session goes on
            log.exception("tool %s failed", raw.tool_name)
            output.error = f"{type(error).__name__}: {error}"
        return output

    def _answer(self, raw: processor_pb2.HookCall) -> processor_pb2.HookResult:
        call = Call(raw)
        before = dict(call.state)
        try:
            result = self.handlers[call.hook](call)
            if inspect.isawaitable(result):  # an `async def` handler: run it to its end here
                result = asyncio.run(_awaited(result))
            if result is None:
                result = processor_pb2.HookResult(**{"continue": processor_pb2.Continue()})
            if not isinstance(result, processor_pb2.HookResult):
                raise TypeError(
                    f"the {call.hook} handler returned {type(result).__name__}; return None or the result of "
                    "abort(), replace(), drop() or retry_api_call()"
                )
        except Exception as error:  # a handler bug fails the run at once, never the session
            log.exception("handler for %s failed", call.hook)
            result = processor_pb2.HookResult(failure=processor_pb2.Failure(message=f"{type(error).__name__}: {error}"))
        result.call_id = raw.call_id
        result.emit.extend(call.emitted)
        result.warnings.extend(call.warnings)
        if call.state != before:
            json_format.ParseDict(call.state, result.state)
        return result

    def _session(self, target: str, server_name: Optional[str], welcomed: threading.Event) -> None:
        outgoing: "queue.Queue[Optional[processor_pb2.ProcessorMessage]]" = queue.Queue()
        hello = processor_pb2.Hello(
            processor_id=self.processor_id,
            instance_id=self.instance_id,
            min_protocol_version=MIN_PROTOCOL_VERSION,
            max_protocol_version=PROTOCOL_VERSION,
            hooks=[HOOKS[hook] for hook in self.handlers],
            max_concurrency=self.max_concurrency,
            hook_options=list(self.options.values()),
            tools=list(self.tool_specs.values()),
        )
        outgoing.put(processor_pb2.ProcessorMessage(hello=hello))

        def messages() -> Iterable[processor_pb2.ProcessorMessage]:
            while True:
                message = outgoing.get()
                if message is None:
                    return
                yield message

        channel = channel_to(target, self.tls, server_name=server_name)
        with self._lock:
            self._channels[target] = channel
        stub = processor_pb2_grpc.ProcessorServiceStub(channel)
        metadata = [("authorization", f"Bearer {self.token}")] if self.token else None
        responses = stub.Connect(messages(), metadata=metadata)
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as workers:
            try:
                for message in responses:
                    kind = message.WhichOneof("message")
                    if kind == "welcome":
                        welcomed.set()
                        with self._changed:
                            again = target in self._welcomed
                            self._connected.add(target)
                            self._welcomed.add(target)
                            self._changed.notify_all()
                        log.info(
                            "%s as %s (instance %s) to %s, protocol %d",
                            "reconnected" if again else "connected",
                            self.processor_id,
                            self.instance_id,
                            target,
                            message.welcome.protocol_version,
                        )
                    elif kind == "call":
                        future = workers.submit(self._answer, message.call)
                        future.add_done_callback(lambda done: outgoing.put(processor_pb2.ProcessorMessage(result=done.result())))
                    elif kind == "tool_call":
                        future = workers.submit(self._run_tool, message.tool_call)
                        future.add_done_callback(lambda done: outgoing.put(processor_pb2.ProcessorMessage(tool_result=done.result())))
                    elif kind == "ping":
                        outgoing.put(processor_pb2.ProcessorMessage(pong=processor_pb2.Pong(nonce=message.ping.nonce)))
                    elif kind == "drain":
                        log.info("%s: the server is draining; will reconnect", self.processor_id)
            finally:
                with self._changed:
                    self._connected.discard(target)
                    self._changed.notify_all()
                outgoing.put(None)
                channel.close()

    def _serve_target(self, target: str, server_name: Optional[str], leaving: threading.Event) -> None:
        """One replica's session, reconnected with backoff until it leaves or `stop`. A refusal
        (unknown id, bad version, bad token) stops everything: `run` raises it."""
        backoff = Backoff()
        while not leaving.is_set():
            welcomed = threading.Event()
            try:
                self._session(target, server_name, welcomed)
                wait = backoff.after(welcomed=True)
            except grpc.RpcError as error:
                code = error.code()
                if code in _REFUSALS:
                    with self._changed:
                        self._refused = error
                        self._changed.notify_all()
                    self._stopping.set()
                    return
                if leaving.is_set():
                    return
                wait = backoff.after(welcomed=welcomed.is_set())
                log.warning("session with %s ended (%s); reconnecting in %.1fs", target, code, wait)
            leaving.wait(wait)

    def _follow(self, targets: Dict[str, Optional[str]]) -> None:
        """Starts a session worker for each new target and ends those of targets gone."""
        with self._lock:
            for target in list(self._leaving):
                if target not in targets:
                    log.info("%s left the resolution; closing its session", target)
                    self._leaving.pop(target).set()
                    channel = self._channels.pop(target, None)
                    if channel is not None:
                        channel.close()
            for target, server_name in targets.items():
                if target not in self._leaving:
                    leaving = threading.Event()
                    self._leaving[target] = leaving
                    worker = threading.Thread(
                        target=self._serve_target, args=(target, server_name, leaving), daemon=True
                    )
                    self._workers.append(worker)
                    worker.start()

    def run(self, address: Union[str, Sequence[str]] = "127.0.0.1:50051") -> None:
        """Serves until `stop`, with one session per replica, each reconnected with backoff:
        `address` is `host:port`, a list of them, or `dns:///name:port` for every address the
        name resolves to (re-resolved every `resolve_every` seconds). Refusals (unknown id, bad
        version, bad token) are not retried: they raise."""
        if not self.handlers and not self.tools:
            raise ValueError("register at least one hook with @processor.on(...) or a tool with @processor.tool(...)")
        addresses = [address] if isinstance(address, str) else list(address)
        if not addresses:
            raise ValueError("give at least one address")
        _show_connection_lines()
        try:
            while not self._stopping.is_set():
                self._follow(_resolve(addresses))
                if not any(entry.startswith(_DNS) for entry in addresses):
                    self._stopping.wait()
                else:
                    self._stopping.wait(self.resolve_every)
        finally:
            with self._lock:
                for leaving in self._leaving.values():
                    leaving.set()
                for channel in self._channels.values():
                    channel.close()
                self._leaving.clear()
                self._channels.clear()
                workers, self._workers = self._workers, []
            # Every session over (and out of `connected()`) before `run` returns.
            for worker in workers:
                worker.join(timeout=5)
        if self._refused is not None:
            raise self._refused

    def start(self, address: Union[str, Sequence[str]] = "127.0.0.1:50051", timeout: float = 10.0) -> "Processor":
        """Serves in a background thread; returns once connected to every replica `address`
        names (after `timeout`, once connected to at least one, logging which are missing)."""
        addresses = [address] if isinstance(address, str) else list(address)
        wanted = set(_resolve(addresses))
        self._thread = threading.Thread(target=self.run, args=(addresses,), daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        with self._changed:
            while not wanted <= self._connected and self._refused is None and time.monotonic() < deadline:
                self._changed.wait(max(0.0, deadline - time.monotonic()))
            if self._refused is not None:
                raise self._refused
            if not self._connected:
                raise TimeoutError(f"processor {self.processor_id!r} did not connect to {address} within {timeout}s")
            missing = sorted(wanted - self._connected)
        if missing:
            log.warning("%s: not connected to %s yet; retrying in the background", self.processor_id, ", ".join(missing))
        return self

    def connected(self) -> List[str]:
        """The replicas (`host:port`) with a session now."""
        with self._lock:
            return sorted(self._connected)

    def stop(self) -> None:
        """Ends every session and stops reconnecting."""
        self._stopping.set()
        with self._lock:
            for channel in self._channels.values():
                channel.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
