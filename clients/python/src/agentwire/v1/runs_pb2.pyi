from agentwire.v1 import agent_pb2 as _agent_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetStatsRequest(_message.Message):
    __slots__ = ("agent_id", "resource_id", "since", "until", "bucket_ms")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    BUCKET_MS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    resource_id: str
    since: int
    until: int
    bucket_ms: int
    def __init__(self, agent_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., since: _Optional[int] = ..., until: _Optional[int] = ..., bucket_ms: _Optional[int] = ...) -> None: ...

class RunStats(_message.Message):
    __slots__ = ("runs", "outcomes", "tripwires", "hooks", "complete", "buckets", "warnings")
    class OutcomesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    RUNS_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    TRIPWIRES_FIELD_NUMBER: _ClassVar[int]
    HOOKS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    runs: int
    outcomes: _containers.ScalarMap[str, int]
    tripwires: _containers.RepeatedCompositeFieldContainer[TripwireCount]
    hooks: _containers.RepeatedCompositeFieldContainer[HookLatency]
    complete: bool
    buckets: _containers.RepeatedCompositeFieldContainer[StatsBucket]
    warnings: _containers.RepeatedCompositeFieldContainer[WarningCount]
    def __init__(self, runs: _Optional[int] = ..., outcomes: _Optional[_Mapping[str, int]] = ..., tripwires: _Optional[_Iterable[_Union[TripwireCount, _Mapping]]] = ..., hooks: _Optional[_Iterable[_Union[HookLatency, _Mapping]]] = ..., complete: _Optional[bool] = ..., buckets: _Optional[_Iterable[_Union[StatsBucket, _Mapping]]] = ..., warnings: _Optional[_Iterable[_Union[WarningCount, _Mapping]]] = ...) -> None: ...

class StatsBucket(_message.Message):
    __slots__ = ("start", "runs", "outcomes", "tripwires", "latency", "warnings")
    class OutcomesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class TripwiresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class LatencyEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: BucketLatency
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[BucketLatency, _Mapping]] = ...) -> None: ...
    class WarningsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    START_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    TRIPWIRES_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    start: int
    runs: int
    outcomes: _containers.ScalarMap[str, int]
    tripwires: _containers.ScalarMap[str, int]
    latency: _containers.MessageMap[str, BucketLatency]
    warnings: _containers.ScalarMap[str, int]
    def __init__(self, start: _Optional[int] = ..., runs: _Optional[int] = ..., outcomes: _Optional[_Mapping[str, int]] = ..., tripwires: _Optional[_Mapping[str, int]] = ..., latency: _Optional[_Mapping[str, BucketLatency]] = ..., warnings: _Optional[_Mapping[str, int]] = ...) -> None: ...

class BucketLatency(_message.Message):
    __slots__ = ("calls", "p50_us", "p95_us")
    CALLS_FIELD_NUMBER: _ClassVar[int]
    P50_US_FIELD_NUMBER: _ClassVar[int]
    P95_US_FIELD_NUMBER: _ClassVar[int]
    calls: int
    p50_us: int
    p95_us: int
    def __init__(self, calls: _Optional[int] = ..., p50_us: _Optional[int] = ..., p95_us: _Optional[int] = ...) -> None: ...

class TripwireCount(_message.Message):
    __slots__ = ("processor_id", "reason", "count")
    PROCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    processor_id: str
    reason: str
    count: int
    def __init__(self, processor_id: _Optional[str] = ..., reason: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class WarningCount(_message.Message):
    __slots__ = ("processor_id", "kind", "count")
    PROCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    processor_id: str
    kind: str
    count: int
    def __init__(self, processor_id: _Optional[str] = ..., kind: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class HookLatency(_message.Message):
    __slots__ = ("processor_id", "hook", "calls", "p50_us", "p95_us", "p99_us", "max_us", "aborts", "failures", "skipped")
    PROCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    HOOK_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    P50_US_FIELD_NUMBER: _ClassVar[int]
    P95_US_FIELD_NUMBER: _ClassVar[int]
    P99_US_FIELD_NUMBER: _ClassVar[int]
    MAX_US_FIELD_NUMBER: _ClassVar[int]
    ABORTS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    processor_id: str
    hook: str
    calls: int
    p50_us: int
    p95_us: int
    p99_us: int
    max_us: int
    aborts: int
    failures: int
    skipped: int
    def __init__(self, processor_id: _Optional[str] = ..., hook: _Optional[str] = ..., calls: _Optional[int] = ..., p50_us: _Optional[int] = ..., p95_us: _Optional[int] = ..., p99_us: _Optional[int] = ..., max_us: _Optional[int] = ..., aborts: _Optional[int] = ..., failures: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class WatchRunsRequest(_message.Message):
    __slots__ = ("agent_id", "resource_id", "thread_id", "outcome", "processor_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PROCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    resource_id: str
    thread_id: str
    outcome: str
    processor_id: str
    def __init__(self, agent_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., outcome: _Optional[str] = ..., processor_id: _Optional[str] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ("started", "ended", "missed")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    started: RunRecord
    ended: RunRecord
    missed: int
    def __init__(self, started: _Optional[_Union[RunRecord, _Mapping]] = ..., ended: _Optional[_Union[RunRecord, _Mapping]] = ..., missed: _Optional[int] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("agent_id", "resource_id", "thread_id", "outcome", "processor_id", "since", "until", "page_size", "page_token")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PROCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    resource_id: str
    thread_id: str
    outcome: str
    processor_id: str
    since: int
    until: int
    page_size: int
    page_token: str
    def __init__(self, agent_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., outcome: _Optional[str] = ..., processor_id: _Optional[str] = ..., since: _Optional[int] = ..., until: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[RunRecord]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[RunRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class RunRecord(_message.Message):
    __slots__ = ("run_id", "agent_id", "thread_id", "resource_id", "key_name", "started_at", "ended_at", "outcome", "finish_reason", "usage", "tripwire", "error", "timeline", "content")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_NAME_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TRIPWIRE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    agent_id: str
    thread_id: str
    resource_id: str
    key_name: str
    started_at: int
    ended_at: int
    outcome: str
    finish_reason: str
    usage: _agent_pb2.Usage
    tripwire: _agent_pb2.Tripwire
    error: _agent_pb2.ErrorPayload
    timeline: _containers.RepeatedCompositeFieldContainer[TimelineEntry]
    content: RunContent
    def __init__(self, run_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., key_name: _Optional[str] = ..., started_at: _Optional[int] = ..., ended_at: _Optional[int] = ..., outcome: _Optional[str] = ..., finish_reason: _Optional[str] = ..., usage: _Optional[_Union[_agent_pb2.Usage, _Mapping]] = ..., tripwire: _Optional[_Union[_agent_pb2.Tripwire, _Mapping]] = ..., error: _Optional[_Union[_agent_pb2.ErrorPayload, _Mapping]] = ..., timeline: _Optional[_Iterable[_Union[TimelineEntry, _Mapping]]] = ..., content: _Optional[_Union[RunContent, _Mapping]] = ...) -> None: ...

class RunContent(_message.Message):
    __slots__ = ("prompts", "chunks", "truncated", "system_withheld")
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_WITHHELD_FIELD_NUMBER: _ClassVar[int]
    prompts: _containers.RepeatedCompositeFieldContainer[PromptRecord]
    chunks: _containers.RepeatedCompositeFieldContainer[_agent_pb2.Chunk]
    truncated: bool
    system_withheld: bool
    def __init__(self, prompts: _Optional[_Iterable[_Union[PromptRecord, _Mapping]]] = ..., chunks: _Optional[_Iterable[_Union[_agent_pb2.Chunk, _Mapping]]] = ..., truncated: _Optional[bool] = ..., system_withheld: _Optional[bool] = ...) -> None: ...

class PromptRecord(_message.Message):
    __slots__ = ("step", "messages")
    STEP_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    step: int
    messages: _containers.RepeatedCompositeFieldContainer[_agent_pb2.Message]
    def __init__(self, step: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[_agent_pb2.Message, _Mapping]]] = ...) -> None: ...

class TimelineEntry(_message.Message):
    __slots__ = ("at_us", "duration_us", "hook", "model", "tool", "warning")
    AT_US_FIELD_NUMBER: _ClassVar[int]
    DURATION_US_FIELD_NUMBER: _ClassVar[int]
    HOOK_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    WARNING_FIELD_NUMBER: _ClassVar[int]
    at_us: int
    duration_us: int
    hook: HookCallEntry
    model: ModelCallEntry
    tool: ToolCallEntry
    warning: WarningEntry
    def __init__(self, at_us: _Optional[int] = ..., duration_us: _Optional[int] = ..., hook: _Optional[_Union[HookCallEntry, _Mapping]] = ..., model: _Optional[_Union[ModelCallEntry, _Mapping]] = ..., tool: _Optional[_Union[ToolCallEntry, _Mapping]] = ..., warning: _Optional[_Union[WarningEntry, _Mapping]] = ...) -> None: ...

class HookCallEntry(_message.Message):
    __slots__ = ("processor_id", "hook", "step", "retry_count", "instance_id", "calls", "max_us", "decision", "reason", "retry", "metadata")
    PROCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    HOOK_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    MAX_US_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    processor_id: str
    hook: str
    step: int
    retry_count: int
    instance_id: str
    calls: int
    max_us: int
    decision: str
    reason: str
    retry: bool
    metadata: _struct_pb2.Value
    def __init__(self, processor_id: _Optional[str] = ..., hook: _Optional[str] = ..., step: _Optional[int] = ..., retry_count: _Optional[int] = ..., instance_id: _Optional[str] = ..., calls: _Optional[int] = ..., max_us: _Optional[int] = ..., decision: _Optional[str] = ..., reason: _Optional[str] = ..., retry: _Optional[bool] = ..., metadata: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ModelCallEntry(_message.Message):
    __slots__ = ("model", "step", "first_token_us", "usage", "from_cache", "error")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    FIRST_TOKEN_US_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    FROM_CACHE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    model: str
    step: int
    first_token_us: int
    usage: _agent_pb2.Usage
    from_cache: bool
    error: str
    def __init__(self, model: _Optional[str] = ..., step: _Optional[int] = ..., first_token_us: _Optional[int] = ..., usage: _Optional[_Union[_agent_pb2.Usage, _Mapping]] = ..., from_cache: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class ToolCallEntry(_message.Message):
    __slots__ = ("name", "step", "error")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    step: int
    error: str
    def __init__(self, name: _Optional[str] = ..., step: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class WarningEntry(_message.Message):
    __slots__ = ("processor_id", "hook", "step", "kind", "message", "details", "count")
    PROCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    HOOK_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    processor_id: str
    hook: str
    step: int
    kind: str
    message: str
    details: _struct_pb2.Value
    count: int
    def __init__(self, processor_id: _Optional[str] = ..., hook: _Optional[str] = ..., step: _Optional[int] = ..., kind: _Optional[str] = ..., message: _Optional[str] = ..., details: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., count: _Optional[int] = ...) -> None: ...
