from agentwire.v1 import agent_pb2 as _agent_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Direction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DIRECTION_UNSPECIFIED: _ClassVar[Direction]
    DIRECTION_FORWARD: _ClassVar[Direction]
    DIRECTION_BACKWARD: _ClassVar[Direction]
DIRECTION_UNSPECIFIED: Direction
DIRECTION_FORWARD: Direction
DIRECTION_BACKWARD: Direction

class Thread(_message.Message):
    __slots__ = ("id", "resource_id", "title", "metadata", "created_at", "updated_at", "message_count")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    id: str
    resource_id: str
    title: str
    metadata: _struct_pb2.Struct
    created_at: int
    updated_at: int
    message_count: int
    def __init__(self, id: _Optional[str] = ..., resource_id: _Optional[str] = ..., title: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., created_at: _Optional[int] = ..., updated_at: _Optional[int] = ..., message_count: _Optional[int] = ...) -> None: ...

class CreateThreadRequest(_message.Message):
    __slots__ = ("thread_id", "resource_id", "title", "metadata")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    resource_id: str
    title: str
    metadata: _struct_pb2.Struct
    def __init__(self, thread_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., title: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GetThreadRequest(_message.Message):
    __slots__ = ("thread_id", "resource_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    resource_id: str
    def __init__(self, thread_id: _Optional[str] = ..., resource_id: _Optional[str] = ...) -> None: ...

class ListThreadsRequest(_message.Message):
    __slots__ = ("resource_id", "page_size", "page_token")
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    resource_id: str
    page_size: int
    page_token: str
    def __init__(self, resource_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListThreadsResponse(_message.Message):
    __slots__ = ("threads", "next_page_token")
    THREADS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    threads: _containers.RepeatedCompositeFieldContainer[Thread]
    next_page_token: str
    def __init__(self, threads: _Optional[_Iterable[_Union[Thread, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateThreadRequest(_message.Message):
    __slots__ = ("thread_id", "resource_id", "title", "metadata")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    resource_id: str
    title: str
    metadata: _struct_pb2.Struct
    def __init__(self, thread_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., title: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class DeleteThreadRequest(_message.Message):
    __slots__ = ("thread_id", "resource_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    resource_id: str
    def __init__(self, thread_id: _Optional[str] = ..., resource_id: _Optional[str] = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ("thread_id", "resource_id", "direction", "page_size", "page_token")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    resource_id: str
    direction: Direction
    page_size: int
    page_token: str
    def __init__(self, thread_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., direction: _Optional[_Union[Direction, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ("messages", "next_page_token")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_agent_pb2.Message]
    next_page_token: str
    def __init__(self, messages: _Optional[_Iterable[_Union[_agent_pb2.Message, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WorkingMemoryScope(_message.Message):
    __slots__ = ("resource_id", "thread_id")
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    resource_id: str
    thread_id: str
    def __init__(self, resource_id: _Optional[str] = ..., thread_id: _Optional[str] = ...) -> None: ...

class WorkingMemory(_message.Message):
    __slots__ = ("scope", "content", "version", "updated_at")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    scope: WorkingMemoryScope
    content: str
    version: int
    updated_at: int
    def __init__(self, scope: _Optional[_Union[WorkingMemoryScope, _Mapping]] = ..., content: _Optional[str] = ..., version: _Optional[int] = ..., updated_at: _Optional[int] = ...) -> None: ...

class GetWorkingMemoryRequest(_message.Message):
    __slots__ = ("scope", "resource_id")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    scope: WorkingMemoryScope
    resource_id: str
    def __init__(self, scope: _Optional[_Union[WorkingMemoryScope, _Mapping]] = ..., resource_id: _Optional[str] = ...) -> None: ...

class UpdateWorkingMemoryRequest(_message.Message):
    __slots__ = ("scope", "content", "expected_version", "resource_id")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    scope: WorkingMemoryScope
    content: str
    expected_version: int
    resource_id: str
    def __init__(self, scope: _Optional[_Union[WorkingMemoryScope, _Mapping]] = ..., content: _Optional[str] = ..., expected_version: _Optional[int] = ..., resource_id: _Optional[str] = ...) -> None: ...

class SearchMessagesRequest(_message.Message):
    __slots__ = ("query", "resource_id", "thread_id", "top_k", "threshold", "embedder", "thread_resource_id")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    THREAD_RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    query: str
    resource_id: str
    thread_id: str
    top_k: int
    threshold: float
    embedder: str
    thread_resource_id: str
    def __init__(self, query: _Optional[str] = ..., resource_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., top_k: _Optional[int] = ..., threshold: _Optional[float] = ..., embedder: _Optional[str] = ..., thread_resource_id: _Optional[str] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("message", "score")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    message: _agent_pb2.Message
    score: float
    def __init__(self, message: _Optional[_Union[_agent_pb2.Message, _Mapping]] = ..., score: _Optional[float] = ...) -> None: ...

class SearchMessagesResponse(_message.Message):
    __slots__ = ("hits",)
    HITS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ...) -> None: ...

class DeleteResourceRequest(_message.Message):
    __slots__ = ("resource_id",)
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    resource_id: str
    def __init__(self, resource_id: _Optional[str] = ...) -> None: ...

class DeleteReport(_message.Message):
    __slots__ = ("threads", "messages", "embeddings", "working_memories")
    THREADS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    WORKING_MEMORIES_FIELD_NUMBER: _ClassVar[int]
    threads: int
    messages: int
    embeddings: int
    working_memories: int
    def __init__(self, threads: _Optional[int] = ..., messages: _Optional[int] = ..., embeddings: _Optional[int] = ..., working_memories: _Optional[int] = ...) -> None: ...
