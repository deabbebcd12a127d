"""Calls agents: `Client(address).generate(...)` and `.stream(...)`; reads run records:
`.list_runs(...)`, `.get_run(...)`, `.watch_runs(...)`, `.get_stats(...)`."""

from __future__ import annotations

import os
from typing import Iterator, Optional

import grpc

from agentwire.tls import TLSOption, channel_to
from agentwire.v1 import agent_pb2, agent_pb2_grpc, memory_pb2_grpc, runs_pb2, runs_pb2_grpc


class _ApiKey(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds `authorization: Bearer <key>` to every call."""

    def __init__(self, key: str) -> None:
        self.header = ("authorization", f"Bearer {key}")

    def _with_key(self, details):
        metadata = list(details.metadata or []) + [self.header]
        return details._replace(metadata=metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_key(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_key(details), request)

    def intercept_stream_unary(self, continuation, details, requests):
        return continuation(self._with_key(details), requests)

    def intercept_stream_stream(self, continuation, details, requests):
        return continuation(self._with_key(details), requests)


class Client:
    """A connection to an agentwire server. `api_key` (default: `$AGENTWIRE_API_KEY`) goes with
    every call, for servers with `[auth]` keys; `tls` connects over TLS (`True`: the system roots,
    or `TLS(ca=..., cert=..., key=...)`)."""

    def __init__(self, address: str = "127.0.0.1:50051", api_key: Optional[str] = None, tls: TLSOption = None) -> None:
        self.channel = channel_to(address, tls)
        key = api_key if api_key is not None else os.environ.get("AGENTWIRE_API_KEY")
        channel = grpc.intercept_channel(self.channel, _ApiKey(key)) if key else self.channel
        self.agents = agent_pb2_grpc.AgentServiceStub(channel)
        self.memory = memory_pb2_grpc.MemoryServiceStub(channel)
        self.runs = runs_pb2_grpc.RunServiceStub(channel)

    @staticmethod
    def _request(agent_id: str, text: str, thread_id: str, resource_id: str, **fields) -> agent_pb2.RunRequest:
        return agent_pb2.RunRequest(agent_id=agent_id, text=text, thread_id=thread_id, resource_id=resource_id, **fields)

    def generate(self, agent_id: str, text: str, thread_id: str = "", resource_id: str = "", **fields) -> agent_pb2.GenerateResponse:
        """Runs an agent to the end; `result.tripwire` is set when a processor aborted."""
        return self.agents.Generate(self._request(agent_id, text, thread_id, resource_id, **fields))

    def stream(self, agent_id: str, text: str, thread_id: str = "", resource_id: str = "", **fields) -> Iterator[agent_pb2.Chunk]:
        """Runs an agent and yields its chunks as they come."""
        return self.agents.Stream(self._request(agent_id, text, thread_id, resource_id, **fields))

    def list_runs(self, page_size: int = 100, **filters) -> Iterator[runs_pb2.RunRecord]:
        """Run records, newest first, without their timelines, page after page until the last.
        Filters: `agent_id`, `resource_id`, `thread_id`, `outcome`, `processor_id`, `since`,
        `until` (milliseconds since the epoch). A key that is not an admin key names a resource."""
        token = ""
        while True:
            page = self.runs.ListRuns(runs_pb2.ListRunsRequest(page_size=page_size, page_token=token, **filters))
            yield from page.runs
            token = page.next_page_token
            if not token:
                return

    def get_run(self, run_id: str) -> runs_pb2.RunRecord:
        """One run's record with its whole timeline (NOT_FOUND until the server has written it)."""
        return self.runs.GetRun(runs_pb2.GetRunRequest(run_id=run_id))

    def watch_runs(self, **filters) -> Iterator[runs_pb2.RunEvent]:
        """Runs as they begin (`event.started`) and end (`event.ended`, the whole record), from now
        on; `event.missed` counts events lost while the reader was behind. Filters as `list_runs`."""
        return self.runs.WatchRuns(runs_pb2.WatchRunsRequest(**filters))

    def get_stats(self, **fields) -> runs_pb2.RunStats:
        """Figures over a window (`agent_id`, `resource_id`, `since`, `until`; `bucket_ms` for
        buckets over time): runs by outcome, tripwires by processor and reason, hook latency."""
        return self.runs.GetStats(runs_pb2.GetStatsRequest(**fields))

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: Optional[object]) -> None:
        self.close()
