from agentwire.v1 import agent_pb2 as _agent_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Hook(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HOOK_UNSPECIFIED: _ClassVar[Hook]
    HOOK_PROCESS_INPUT: _ClassVar[Hook]
    HOOK_PROCESS_INPUT_STEP: _ClassVar[Hook]
    HOOK_PROCESS_LLM_REQUEST: _ClassVar[Hook]
    HOOK_PROCESS_API_ERROR: _ClassVar[Hook]
    HOOK_PROCESS_OUTPUT_STREAM: _ClassVar[Hook]
    HOOK_PROCESS_LLM_RESPONSE: _ClassVar[Hook]
    HOOK_PROCESS_OUTPUT_STEP: _ClassVar[Hook]
    HOOK_PROCESS_TOOL_RESULT: _ClassVar[Hook]
    HOOK_PROCESS_OUTPUT_RESULT: _ClassVar[Hook]

class HookMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HOOK_MODE_UNSPECIFIED: _ClassVar[HookMode]
    HOOK_MODE_BLOCKING: _ClassVar[HookMode]
    HOOK_MODE_OBSERVE: _ClassVar[HookMode]

class MessageSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MESSAGE_SOURCE_UNSPECIFIED: _ClassVar[MessageSource]
    MESSAGE_SOURCE_MEMORY: _ClassVar[MessageSource]
    MESSAGE_SOURCE_INPUT: _ClassVar[MessageSource]
    MESSAGE_SOURCE_RESPONSE: _ClassVar[MessageSource]
    MESSAGE_SOURCE_SIGNAL: _ClassVar[MessageSource]
HOOK_UNSPECIFIED: Hook
HOOK_PROCESS_INPUT: Hook
HOOK_PROCESS_INPUT_STEP: Hook
HOOK_PROCESS_LLM_REQUEST: Hook
HOOK_PROCESS_API_ERROR: Hook
HOOK_PROCESS_OUTPUT_STREAM: Hook
HOOK_PROCESS_LLM_RESPONSE: Hook
HOOK_PROCESS_OUTPUT_STEP: Hook
HOOK_PROCESS_TOOL_RESULT: Hook
HOOK_PROCESS_OUTPUT_RESULT: Hook
HOOK_MODE_UNSPECIFIED: HookMode
HOOK_MODE_BLOCKING: HookMode
HOOK_MODE_OBSERVE: HookMode
MESSAGE_SOURCE_UNSPECIFIED: MessageSource
MESSAGE_SOURCE_MEMORY: MessageSource
MESSAGE_SOURCE_INPUT: MessageSource
MESSAGE_SOURCE_RESPONSE: MessageSource
MESSAGE_SOURCE_SIGNAL: MessageSource

class ListProcessorsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ProcessorInstance(_message.Message):
    __slots__ = ("processor_id", "instance_id", "hooks", "in_flight", "calls", "errors", "mean_latency_ms", "connected_at", "dropped")
    PROCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    HOOKS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    MEAN_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_AT_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    processor_id: str
    instance_id: str
    hooks: _containers.RepeatedScalarFieldContainer[Hook]
    in_flight: int
    calls: int
    errors: int
    mean_latency_ms: float
    connected_at: int
    dropped: int
    def __init__(self, processor_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., hooks: _Optional[_Iterable[_Union[Hook, str]]] = ..., in_flight: _Optional[int] = ..., calls: _Optional[int] = ..., errors: _Optional[int] = ..., mean_latency_ms: _Optional[float] = ..., connected_at: _Optional[int] = ..., dropped: _Optional[int] = ...) -> None: ...

class ListProcessorsResponse(_message.Message):
    __slots__ = ("instances",)
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    instances: _containers.RepeatedCompositeFieldContainer[ProcessorInstance]
    def __init__(self, instances: _Optional[_Iterable[_Union[ProcessorInstance, _Mapping]]] = ...) -> None: ...

class ProcessorMessage(_message.Message):
    __slots__ = ("hello", "result", "pong", "tool_result")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    PONG_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    result: HookResult
    pong: Pong
    tool_result: ToolOutput
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., result: _Optional[_Union[HookResult, _Mapping]] = ..., pong: _Optional[_Union[Pong, _Mapping]] = ..., tool_result: _Optional[_Union[ToolOutput, _Mapping]] = ...) -> None: ...

class ServerMessage(_message.Message):
    __slots__ = ("welcome", "call", "cancel", "ping", "drain", "tool_call")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    call: HookCall
    cancel: Cancel
    ping: Ping
    drain: Drain
    tool_call: ToolInvocation
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., call: _Optional[_Union[HookCall, _Mapping]] = ..., cancel: _Optional[_Union[Cancel, _Mapping]] = ..., ping: _Optional[_Union[Ping, _Mapping]] = ..., drain: _Optional[_Union[Drain, _Mapping]] = ..., tool_call: _Optional[_Union[ToolInvocation, _Mapping]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("processor_id", "instance_id", "min_protocol_version", "max_protocol_version", "hooks", "max_concurrency", "hook_options", "tools")
    PROCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    HOOKS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    HOOK_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    processor_id: str
    instance_id: str
    min_protocol_version: int
    max_protocol_version: int
    hooks: _containers.RepeatedScalarFieldContainer[Hook]
    max_concurrency: int
    hook_options: _containers.RepeatedCompositeFieldContainer[HookOptions]
    tools: _containers.RepeatedCompositeFieldContainer[ToolSpec]
    def __init__(self, processor_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., min_protocol_version: _Optional[int] = ..., max_protocol_version: _Optional[int] = ..., hooks: _Optional[_Iterable[_Union[Hook, str]]] = ..., max_concurrency: _Optional[int] = ..., hook_options: _Optional[_Iterable[_Union[HookOptions, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[ToolSpec, _Mapping]]] = ...) -> None: ...

class ToolSpec(_message.Message):
    __slots__ = ("name", "description", "parameters")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ToolInvocation(_message.Message):
    __slots__ = ("call_id", "run_id", "agent_id", "tool_call_id", "tool_name", "args", "deadline_unix_ms", "trace_context")
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    run_id: str
    agent_id: str
    tool_call_id: str
    tool_name: str
    args: _struct_pb2.Value
    deadline_unix_ms: int
    trace_context: _containers.ScalarMap[str, str]
    def __init__(self, call_id: _Optional[int] = ..., run_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., deadline_unix_ms: _Optional[int] = ..., trace_context: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ToolOutput(_message.Message):
    __slots__ = ("call_id", "result", "error")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    result: _struct_pb2.Value
    error: str
    def __init__(self, call_id: _Optional[int] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class HookOptions(_message.Message):
    __slots__ = ("hook", "mode", "window", "data_parts")
    HOOK_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    DATA_PARTS_FIELD_NUMBER: _ClassVar[int]
    hook: Hook
    mode: HookMode
    window: StreamWindow
    data_parts: bool
    def __init__(self, hook: _Optional[_Union[Hook, str]] = ..., mode: _Optional[_Union[HookMode, str]] = ..., window: _Optional[_Union[StreamWindow, _Mapping]] = ..., data_parts: _Optional[bool] = ...) -> None: ...

class StreamWindow(_message.Message):
    __slots__ = ("max_chunks", "max_delay_ms")
    MAX_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    MAX_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    max_chunks: int
    max_delay_ms: int
    def __init__(self, max_chunks: _Optional[int] = ..., max_delay_ms: _Optional[int] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("protocol_version", "session_id", "max_frame_bytes")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAME_BYTES_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    session_id: str
    max_frame_bytes: int
    def __init__(self, protocol_version: _Optional[int] = ..., session_id: _Optional[str] = ..., max_frame_bytes: _Optional[int] = ...) -> None: ...

class HookCall(_message.Message):
    __slots__ = ("call_id", "run_id", "agent_id", "thread_id", "resource_id", "hook", "step", "deadline_unix_ms", "retry_count", "state", "request_context", "trace_context", "messages", "system_messages", "part", "model", "text", "finish_reason", "usage", "tool_calls", "tool_call", "tool_result", "error_status", "error_message", "prompt", "chunks", "tools", "message_sources", "tagged_system_messages", "steps", "step_input")
    class RequestContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    HOOK_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_SOURCES_FIELD_NUMBER: _ClassVar[int]
    TAGGED_SYSTEM_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    STEP_INPUT_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    run_id: str
    agent_id: str
    thread_id: str
    resource_id: str
    hook: Hook
    step: int
    deadline_unix_ms: int
    retry_count: int
    state: _struct_pb2.Struct
    request_context: _containers.ScalarMap[str, str]
    trace_context: _containers.ScalarMap[str, str]
    messages: _containers.RepeatedCompositeFieldContainer[_agent_pb2.Message]
    system_messages: _containers.RepeatedScalarFieldContainer[str]
    part: _agent_pb2.Chunk
    model: str
    text: str
    finish_reason: str
    usage: _agent_pb2.Usage
    tool_calls: _containers.RepeatedCompositeFieldContainer[_agent_pb2.ToolCallPart]
    tool_call: _agent_pb2.ToolCallPart
    tool_result: _agent_pb2.ToolResultPart
    error_status: int
    error_message: str
    prompt: _containers.RepeatedCompositeFieldContainer[_agent_pb2.Message]
    chunks: _containers.RepeatedCompositeFieldContainer[_agent_pb2.Chunk]
    tools: _containers.RepeatedScalarFieldContainer[str]
    message_sources: _containers.RepeatedScalarFieldContainer[MessageSource]
    tagged_system_messages: _containers.RepeatedCompositeFieldContainer[TaggedSystemMessage]
    steps: _containers.RepeatedCompositeFieldContainer[_agent_pb2.StepResult]
    step_input: StepInput
    def __init__(self, call_id: _Optional[int] = ..., run_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., hook: _Optional[_Union[Hook, str]] = ..., step: _Optional[int] = ..., deadline_unix_ms: _Optional[int] = ..., retry_count: _Optional[int] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., request_context: _Optional[_Mapping[str, str]] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., messages: _Optional[_Iterable[_Union[_agent_pb2.Message, _Mapping]]] = ..., system_messages: _Optional[_Iterable[str]] = ..., part: _Optional[_Union[_agent_pb2.Chunk, _Mapping]] = ..., model: _Optional[str] = ..., text: _Optional[str] = ..., finish_reason: _Optional[str] = ..., usage: _Optional[_Union[_agent_pb2.Usage, _Mapping]] = ..., tool_calls: _Optional[_Iterable[_Union[_agent_pb2.ToolCallPart, _Mapping]]] = ..., tool_call: _Optional[_Union[_agent_pb2.ToolCallPart, _Mapping]] = ..., tool_result: _Optional[_Union[_agent_pb2.ToolResultPart, _Mapping]] = ..., error_status: _Optional[int] = ..., error_message: _Optional[str] = ..., prompt: _Optional[_Iterable[_Union[_agent_pb2.Message, _Mapping]]] = ..., chunks: _Optional[_Iterable[_Union[_agent_pb2.Chunk, _Mapping]]] = ..., tools: _Optional[_Iterable[str]] = ..., message_sources: _Optional[_Iterable[_Union[MessageSource, str]]] = ..., tagged_system_messages: _Optional[_Iterable[_Union[TaggedSystemMessage, _Mapping]]] = ..., steps: _Optional[_Iterable[_Union[_agent_pb2.StepResult, _Mapping]]] = ..., step_input: _Optional[_Union[StepInput, _Mapping]] = ...) -> None: ...

class StepInput(_message.Message):
    __slots__ = ("model", "tools", "tool_choice", "active_tools", "settings", "provider_options", "structured_output")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_TOOLS_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    model: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolSpec]
    tool_choice: str
    active_tools: StringList
    settings: ModelSettings
    provider_options: _struct_pb2.Struct
    structured_output: _struct_pb2.Struct
    def __init__(self, model: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[ToolSpec, _Mapping]]] = ..., tool_choice: _Optional[str] = ..., active_tools: _Optional[_Union[StringList, _Mapping]] = ..., settings: _Optional[_Union[ModelSettings, _Mapping]] = ..., provider_options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., structured_output: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ModelSettings(_message.Message):
    __slots__ = ("temperature", "max_tokens", "top_p", "stop", "seed")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    max_tokens: int
    top_p: float
    stop: _containers.RepeatedScalarFieldContainer[str]
    seed: int
    def __init__(self, temperature: _Optional[float] = ..., max_tokens: _Optional[int] = ..., top_p: _Optional[float] = ..., stop: _Optional[_Iterable[str]] = ..., seed: _Optional[int] = ...) -> None: ...

class TaggedSystemMessage(_message.Message):
    __slots__ = ("tag", "text")
    TAG_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    tag: str
    text: str
    def __init__(self, tag: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class HookResult(_message.Message):
    __slots__ = ("call_id", "state", "abort", "replace", "drop", "retry_api_call", "failure", "emit", "warnings")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONTINUE_FIELD_NUMBER: _ClassVar[int]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    DROP_FIELD_NUMBER: _ClassVar[int]
    RETRY_API_CALL_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    EMIT_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    state: _struct_pb2.Struct
    abort: Abort
    replace: Replacement
    drop: Drop
    retry_api_call: RetryApiCall
    failure: Failure
    emit: _containers.RepeatedCompositeFieldContainer[_agent_pb2.Chunk]
    warnings: _containers.RepeatedCompositeFieldContainer[Warning]
    def __init__(self, call_id: _Optional[int] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., abort: _Optional[_Union[Abort, _Mapping]] = ..., replace: _Optional[_Union[Replacement, _Mapping]] = ..., drop: _Optional[_Union[Drop, _Mapping]] = ..., retry_api_call: _Optional[_Union[RetryApiCall, _Mapping]] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., emit: _Optional[_Iterable[_Union[_agent_pb2.Chunk, _Mapping]]] = ..., warnings: _Optional[_Iterable[_Union[Warning, _Mapping]]] = ..., **kwargs) -> None: ...

class Warning(_message.Message):
    __slots__ = ("kind", "message", "details")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    message: str
    details: _struct_pb2.Value
    def __init__(self, kind: _Optional[str] = ..., message: _Optional[str] = ..., details: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class Continue(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Drop(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RetryApiCall(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: MessageList
    def __init__(self, messages: _Optional[_Union[MessageList, _Mapping]] = ...) -> None: ...

class Abort(_message.Message):
    __slots__ = ("reason", "retry", "metadata")
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    reason: str
    retry: bool
    metadata: _struct_pb2.Value
    def __init__(self, reason: _Optional[str] = ..., retry: _Optional[bool] = ..., metadata: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class Replacement(_message.Message):
    __slots__ = ("messages", "system_messages", "part", "tool_result", "model", "tool_choice", "active_tools", "prompt", "parts", "add_tagged_system_messages", "clear_system_tags", "response", "tools", "model_settings", "provider_options", "structured_output")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_TOOLS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    ADD_TAGGED_SYSTEM_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    CLEAR_SYSTEM_TAGS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    MODEL_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    messages: MessageList
    system_messages: StringList
    part: _agent_pb2.Chunk
    tool_result: _struct_pb2.Value
    model: str
    tool_choice: str
    active_tools: StringList
    prompt: MessageList
    parts: ChunkList
    add_tagged_system_messages: _containers.RepeatedCompositeFieldContainer[TaggedSystemMessage]
    clear_system_tags: _containers.RepeatedScalarFieldContainer[str]
    response: ChunkList
    tools: ToolSpecList
    model_settings: ModelSettings
    provider_options: _struct_pb2.Struct
    structured_output: _struct_pb2.Struct
    def __init__(self, messages: _Optional[_Union[MessageList, _Mapping]] = ..., system_messages: _Optional[_Union[StringList, _Mapping]] = ..., part: _Optional[_Union[_agent_pb2.Chunk, _Mapping]] = ..., tool_result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., model: _Optional[str] = ..., tool_choice: _Optional[str] = ..., active_tools: _Optional[_Union[StringList, _Mapping]] = ..., prompt: _Optional[_Union[MessageList, _Mapping]] = ..., parts: _Optional[_Union[ChunkList, _Mapping]] = ..., add_tagged_system_messages: _Optional[_Iterable[_Union[TaggedSystemMessage, _Mapping]]] = ..., clear_system_tags: _Optional[_Iterable[str]] = ..., response: _Optional[_Union[ChunkList, _Mapping]] = ..., tools: _Optional[_Union[ToolSpecList, _Mapping]] = ..., model_settings: _Optional[_Union[ModelSettings, _Mapping]] = ..., provider_options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., structured_output: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ToolSpecList(_message.Message):
    __slots__ = ("tools",)
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[ToolSpec]
    def __init__(self, tools: _Optional[_Iterable[_Union[ToolSpec, _Mapping]]] = ...) -> None: ...

class ChunkList(_message.Message):
    __slots__ = ("chunks",)
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[_agent_pb2.Chunk]
    def __init__(self, chunks: _Optional[_Iterable[_Union[_agent_pb2.Chunk, _Mapping]]] = ...) -> None: ...

class MessageList(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_agent_pb2.Message]
    def __init__(self, messages: _Optional[_Iterable[_Union[_agent_pb2.Message, _Mapping]]] = ...) -> None: ...

class StringList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = ("nonce",)
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: int
    def __init__(self, nonce: _Optional[int] = ...) -> None: ...

class Pong(_message.Message):
    __slots__ = ("nonce",)
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: int
    def __init__(self, nonce: _Optional[int] = ...) -> None: ...

class Cancel(_message.Message):
    __slots__ = ("call_id",)
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    def __init__(self, call_id: _Optional[int] = ...) -> None: ...

class Drain(_message.Message):
    __slots__ = ("deadline_unix_ms",)
    DEADLINE_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    deadline_unix_ms: int
    def __init__(self, deadline_unix_ms: _Optional[int] = ...) -> None: ...
