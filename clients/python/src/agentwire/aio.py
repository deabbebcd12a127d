"""Calls agents from asyncio, on `grpc.aio`: `async with AsyncClient(address) as client:` then
`await client.generate(...)` and `async for chunk in client.stream(...)`."""

from __future__ import annotations

import os
from typing import AsyncIterator, Optional

import grpc

from agentwire.tls import TLSOption, aio_channel_to
from agentwire.v1 import agent_pb2, agent_pb2_grpc, memory_pb2_grpc, runs_pb2, runs_pb2_grpc


class _ApiKey(
    grpc.aio.UnaryUnaryClientInterceptor,
    grpc.aio.UnaryStreamClientInterceptor,
    grpc.aio.StreamUnaryClientInterceptor,
    grpc.aio.StreamStreamClientInterceptor,
):
    """Adds `authorization: Bearer <key>` to every call."""

    def __init__(self, key: str) -> None:
        self.header = ("authorization", f"Bearer {key}")

    def _with_key(self, details):
        metadata = grpc.aio.Metadata(*(details.metadata or ()), self.header)
        return details._replace(metadata=metadata)

    async def intercept_unary_unary(self, continuation, details, request):
        return await continuation(self._with_key(details), request)

    async def intercept_unary_stream(self, continuation, details, request):
        return await continuation(self._with_key(details), request)

    async def intercept_stream_unary(self, continuation, details, requests):
        return await continuation(self._with_key(details), requests)

    async def intercept_stream_stream(self, continuation, details, requests):
        return await continuation(self._with_key(details), requests)


class AsyncClient:
    """`Client` for asyncio: the same options (`api_key`, default `$AGENTWIRE_API_KEY`; `tls`)."""

    def __init__(self, address: str = "127.0.0.1:50051", api_key: Optional[str] = None, tls: TLSOption = None) -> None:
        key = api_key if api_key is not None else os.environ.get("AGENTWIRE_API_KEY")
        self.channel = aio_channel_to(address, tls, [_ApiKey(key)] if key else None)
        self.agents = agent_pb2_grpc.AgentServiceStub(self.channel)
        self.memory = memory_pb2_grpc.MemoryServiceStub(self.channel)
        self.runs = runs_pb2_grpc.RunServiceStub(self.channel)

    async def generate(self, agent_id: str, text: str, thread_id: str = "", resource_id: str = "", **fields) -> agent_pb2.GenerateResponse:
        """Runs an agent to the end; `result.tripwire` is set when a processor aborted."""
        request = agent_pb2.RunRequest(agent_id=agent_id, text=text, thread_id=thread_id, resource_id=resource_id, **fields)
        return await self.agents.Generate(request)

    async def stream(self, agent_id: str, text: str, thread_id: str = "", resource_id: str = "", **fields) -> AsyncIterator[agent_pb2.Chunk]:
        """Runs an agent and yields its chunks as they come; leaving the loop cancels the run."""
        request = agent_pb2.RunRequest(agent_id=agent_id, text=text, thread_id=thread_id, resource_id=resource_id, **fields)
        call = self.agents.Stream(request)
        try:
            async for chunk in call:
                yield chunk
        finally:
            call.cancel()

    async def list_runs(self, page_size: int = 100, **filters) -> AsyncIterator[runs_pb2.RunRecord]:
        """Run records, newest first, without timelines, page after page (`Client.list_runs`)."""
        token = ""
        while True:
            page = await self.runs.ListRuns(runs_pb2.ListRunsRequest(page_size=page_size, page_token=token, **filters))
            for record in page.runs:
                yield record
            token = page.next_page_token
            if not token:
                return

    async def get_run(self, run_id: str) -> runs_pb2.RunRecord:
        """One run's record with its whole timeline."""
        return await self.runs.GetRun(runs_pb2.GetRunRequest(run_id=run_id))

    async def watch_runs(self, **filters) -> AsyncIterator[runs_pb2.RunEvent]:
        """Runs as they begin and end, from now on; leaving the loop ends the watch."""
        call = self.runs.WatchRuns(runs_pb2.WatchRunsRequest(**filters))
        try:
            async for event in call:
                yield event
        finally:
            call.cancel()

    async def get_stats(self, **fields) -> runs_pb2.RunStats:
        """Figures over a window (`Client.get_stats`)."""
        return await self.runs.GetStats(runs_pb2.GetStatsRequest(**fields))

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *_: Optional[object]) -> None:
        await self.close()
