"""Calls agents: `Client(address).generate(...)` and `.stream(...)`."""

from __future__ import annotations

from typing import Iterator, Optional

import grpc

from agentwire.v1 import agent_pb2, agent_pb2_grpc, memory_pb2_grpc


class Client:
    """A connection to an agentwire server."""

    def __init__(self, address: str = "127.0.0.1:50051") -> None:
        self.channel = grpc.insecure_channel(address)
        self.agents = agent_pb2_grpc.AgentServiceStub(self.channel)
        self.memory = memory_pb2_grpc.MemoryServiceStub(self.channel)

    @staticmethod
    def _request(agent_id: str, text: str, thread_id: str, resource_id: str, **fields) -> agent_pb2.RunRequest:
        return agent_pb2.RunRequest(agent_id=agent_id, text=text, thread_id=thread_id, resource_id=resource_id, **fields)

    def generate(self, agent_id: str, text: str, thread_id: str = "", resource_id: str = "", **fields) -> agent_pb2.GenerateResponse:
        """Runs an agent to the end; `result.tripwire` is set when a processor aborted."""
        return self.agents.Generate(self._request(agent_id, text, thread_id, resource_id, **fields))

    def stream(self, agent_id: str, text: str, thread_id: str = "", resource_id: str = "", **fields) -> Iterator[agent_pb2.Chunk]:
        """Runs an agent and yields its chunks as they come."""
        return self.agents.Stream(self._request(agent_id, text, thread_id, resource_id, **fields))

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: Optional[object]) -> None:
        self.close()
