from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunRequest(_message.Message):
    __slots__ = ("agent_id", "text", "messages", "thread_id", "resource_id", "request_context", "input_processors", "output_processors", "error_processors", "max_processor_retries", "max_steps", "output_schema")
    class RequestContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    INPUT_PROCESSORS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PROCESSORS_FIELD_NUMBER: _ClassVar[int]
    ERROR_PROCESSORS_FIELD_NUMBER: _ClassVar[int]
    MAX_PROCESSOR_RETRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    text: str
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    thread_id: str
    resource_id: str
    request_context: _containers.ScalarMap[str, str]
    input_processors: ProcessorList
    output_processors: ProcessorList
    error_processors: ProcessorList
    max_processor_retries: int
    max_steps: int
    output_schema: _struct_pb2.Struct
    def __init__(self, agent_id: _Optional[str] = ..., text: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., thread_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., request_context: _Optional[_Mapping[str, str]] = ..., input_processors: _Optional[_Union[ProcessorList, _Mapping]] = ..., output_processors: _Optional[_Union[ProcessorList, _Mapping]] = ..., error_processors: _Optional[_Union[ProcessorList, _Mapping]] = ..., max_processor_retries: _Optional[int] = ..., max_steps: _Optional[int] = ..., output_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ProcessorList(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("id", "thread_id", "resource_id", "role", "parts", "created_at", "metadata")
    ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    thread_id: str
    resource_id: str
    role: str
    parts: _containers.RepeatedCompositeFieldContainer[Part]
    created_at: int
    metadata: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., thread_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., role: _Optional[str] = ..., parts: _Optional[_Iterable[_Union[Part, _Mapping]]] = ..., created_at: _Optional[int] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ("text", "reasoning", "tool_call", "tool_result", "file", "data")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    text: TextPart
    reasoning: ReasoningPart
    tool_call: ToolCallPart
    tool_result: ToolResultPart
    file: FilePart
    data: DataPart
    def __init__(self, text: _Optional[_Union[TextPart, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningPart, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCallPart, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResultPart, _Mapping]] = ..., file: _Optional[_Union[FilePart, _Mapping]] = ..., data: _Optional[_Union[DataPart, _Mapping]] = ...) -> None: ...

class TextPart(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ReasoningPart(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ToolCallPart(_message.Message):
    __slots__ = ("tool_call_id", "tool_name", "args")
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    tool_call_id: str
    tool_name: str
    args: _struct_pb2.Value
    def __init__(self, tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ToolResultPart(_message.Message):
    __slots__ = ("tool_call_id", "tool_name", "result", "is_error")
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    tool_call_id: str
    tool_name: str
    result: _struct_pb2.Value
    is_error: bool
    def __init__(self, tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., is_error: _Optional[bool] = ...) -> None: ...

class FilePart(_message.Message):
    __slots__ = ("media_type", "data", "url", "filename")
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    media_type: str
    data: bytes
    url: str
    filename: str
    def __init__(self, media_type: _Optional[str] = ..., data: _Optional[bytes] = ..., url: _Optional[str] = ..., filename: _Optional[str] = ...) -> None: ...

class DataPart(_message.Message):
    __slots__ = ("type", "data", "id")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    type: str
    data: _struct_pb2.Value
    id: str
    def __init__(self, type: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., id: _Optional[str] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("run_id", "type", "start", "step_start", "text_delta", "reasoning_delta", "tool_call", "tool_result", "step_finish", "data", "tripwire", "error", "finish")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STEP_START_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    REASONING_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    STEP_FINISH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TRIPWIRE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINISH_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    type: str
    start: StartPayload
    step_start: StepStartPayload
    text_delta: DeltaPayload
    reasoning_delta: DeltaPayload
    tool_call: ToolCallPart
    tool_result: ToolResultPart
    step_finish: StepFinishPayload
    data: DataPayload
    tripwire: Tripwire
    error: ErrorPayload
    finish: FinishPayload
    def __init__(self, run_id: _Optional[str] = ..., type: _Optional[str] = ..., start: _Optional[_Union[StartPayload, _Mapping]] = ..., step_start: _Optional[_Union[StepStartPayload, _Mapping]] = ..., text_delta: _Optional[_Union[DeltaPayload, _Mapping]] = ..., reasoning_delta: _Optional[_Union[DeltaPayload, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCallPart, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResultPart, _Mapping]] = ..., step_finish: _Optional[_Union[StepFinishPayload, _Mapping]] = ..., data: _Optional[_Union[DataPayload, _Mapping]] = ..., tripwire: _Optional[_Union[Tripwire, _Mapping]] = ..., error: _Optional[_Union[ErrorPayload, _Mapping]] = ..., finish: _Optional[_Union[FinishPayload, _Mapping]] = ...) -> None: ...

class StartPayload(_message.Message):
    __slots__ = ("agent_id", "thread_id", "resource_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    thread_id: str
    resource_id: str
    def __init__(self, agent_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., resource_id: _Optional[str] = ...) -> None: ...

class StepStartPayload(_message.Message):
    __slots__ = ("step", "message_id", "model")
    STEP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    step: int
    message_id: str
    model: str
    def __init__(self, step: _Optional[int] = ..., message_id: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class DeltaPayload(_message.Message):
    __slots__ = ("id", "text")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class StepFinishPayload(_message.Message):
    __slots__ = ("step", "finish_reason", "usage", "rejected")
    STEP_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    step: int
    finish_reason: str
    usage: Usage
    rejected: Tripwire
    def __init__(self, step: _Optional[int] = ..., finish_reason: _Optional[str] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., rejected: _Optional[_Union[Tripwire, _Mapping]] = ...) -> None: ...

class DataPayload(_message.Message):
    __slots__ = ("data", "id", "transient")
    DATA_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TRANSIENT_FIELD_NUMBER: _ClassVar[int]
    data: _struct_pb2.Value
    id: str
    transient: bool
    def __init__(self, data: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., id: _Optional[str] = ..., transient: _Optional[bool] = ...) -> None: ...

class Tripwire(_message.Message):
    __slots__ = ("reason", "retry", "metadata", "processor_id")
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PROCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    retry: bool
    metadata: _struct_pb2.Value
    processor_id: str
    def __init__(self, reason: _Optional[str] = ..., retry: _Optional[bool] = ..., metadata: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., processor_id: _Optional[str] = ...) -> None: ...

class ErrorPayload(_message.Message):
    __slots__ = ("message", "source", "origin")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    message: str
    source: str
    origin: str
    def __init__(self, message: _Optional[str] = ..., source: _Optional[str] = ..., origin: _Optional[str] = ...) -> None: ...

class FinishPayload(_message.Message):
    __slots__ = ("finish_reason", "usage", "text", "object")
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    finish_reason: str
    usage: Usage
    text: str
    object: _struct_pb2.Value
    def __init__(self, finish_reason: _Optional[str] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., text: _Optional[str] = ..., object: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "total_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    total_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("run_id", "text", "finish_reason", "usage", "steps", "tripwire", "error", "messages", "data", "skipped_processors", "object")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TRIPWIRE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_PROCESSORS_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    text: str
    finish_reason: str
    usage: Usage
    steps: _containers.RepeatedCompositeFieldContainer[StepResult]
    tripwire: Tripwire
    error: ErrorPayload
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    data: _containers.RepeatedCompositeFieldContainer[Chunk]
    skipped_processors: _containers.RepeatedCompositeFieldContainer[SkippedProcessor]
    object: _struct_pb2.Value
    def __init__(self, run_id: _Optional[str] = ..., text: _Optional[str] = ..., finish_reason: _Optional[str] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., steps: _Optional[_Iterable[_Union[StepResult, _Mapping]]] = ..., tripwire: _Optional[_Union[Tripwire, _Mapping]] = ..., error: _Optional[_Union[ErrorPayload, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., data: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ..., skipped_processors: _Optional[_Iterable[_Union[SkippedProcessor, _Mapping]]] = ..., object: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class SkippedProcessor(_message.Message):
    __slots__ = ("processor_id", "hook", "cause")
    PROCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    HOOK_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    processor_id: str
    hook: str
    cause: str
    def __init__(self, processor_id: _Optional[str] = ..., hook: _Optional[str] = ..., cause: _Optional[str] = ...) -> None: ...

class StepResult(_message.Message):
    __slots__ = ("step", "text", "reasoning", "finish_reason", "usage", "tool_calls", "tool_results", "tripwire", "model")
    STEP_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    TRIPWIRE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    step: int
    text: str
    reasoning: str
    finish_reason: str
    usage: Usage
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCallPart]
    tool_results: _containers.RepeatedCompositeFieldContainer[ToolResultPart]
    tripwire: Tripwire
    model: str
    def __init__(self, step: _Optional[int] = ..., text: _Optional[str] = ..., reasoning: _Optional[str] = ..., finish_reason: _Optional[str] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCallPart, _Mapping]]] = ..., tool_results: _Optional[_Iterable[_Union[ToolResultPart, _Mapping]]] = ..., tripwire: _Optional[_Union[Tripwire, _Mapping]] = ..., model: _Optional[str] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ("agents",)
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[Agent]
    def __init__(self, agents: _Optional[_Iterable[_Union[Agent, _Mapping]]] = ...) -> None: ...

class GetAgentRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class Agent(_message.Message):
    __slots__ = ("id", "name", "instructions", "model", "input_processors", "output_processors", "error_processors", "tools", "max_steps", "max_processor_retries", "pipeline")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_PROCESSORS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PROCESSORS_FIELD_NUMBER: _ClassVar[int]
    ERROR_PROCESSORS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    MAX_PROCESSOR_RETRIES_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    instructions: str
    model: str
    input_processors: _containers.RepeatedScalarFieldContainer[str]
    output_processors: _containers.RepeatedScalarFieldContainer[str]
    error_processors: _containers.RepeatedScalarFieldContainer[str]
    tools: _containers.RepeatedScalarFieldContainer[str]
    max_steps: int
    max_processor_retries: int
    pipeline: _containers.RepeatedCompositeFieldContainer[PipelineProcessor]
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., instructions: _Optional[str] = ..., model: _Optional[str] = ..., input_processors: _Optional[_Iterable[str]] = ..., output_processors: _Optional[_Iterable[str]] = ..., error_processors: _Optional[_Iterable[str]] = ..., tools: _Optional[_Iterable[str]] = ..., max_steps: _Optional[int] = ..., max_processor_retries: _Optional[int] = ..., pipeline: _Optional[_Iterable[_Union[PipelineProcessor, _Mapping]]] = ...) -> None: ...

class PipelineProcessor(_message.Message):
    __slots__ = ("stage", "id", "kind", "options", "automatic", "hooks")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    AUTOMATIC_FIELD_NUMBER: _ClassVar[int]
    HOOKS_FIELD_NUMBER: _ClassVar[int]
    stage: str
    id: str
    kind: str
    options: _struct_pb2.Struct
    automatic: bool
    hooks: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, stage: _Optional[str] = ..., id: _Optional[str] = ..., kind: _Optional[str] = ..., options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., automatic: _Optional[bool] = ..., hooks: _Optional[_Iterable[str]] = ...) -> None: ...
