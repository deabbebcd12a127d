"""agentwire: call agents, and serve processor hooks from Python.

    from agentwire import Client, Processor, abort
"""

from agentwire.aio import AsyncClient
from agentwire.client import Client
from agentwire.tls import TLS
from agentwire.processor import Call, Processor, Window, abort, drop, replace, retry_api_call, text_delta

__all__ = ["AsyncClient", "Call", "Client", "Processor", "abort", "drop", "replace", "retry_api_call", "text_delta", "TLS", "Window"]
