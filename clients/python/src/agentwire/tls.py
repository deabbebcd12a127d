"""TLS for connections to agentwire: the server's CA (or the system roots), and a client
certificate for servers that require mTLS (`[tls] client_ca`)."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Optional, Union

import grpc


@dataclass(frozen=True)
class TLS:
    """`ca`: PEM file of the CA that signed the server's certificate (None: the system roots).
    `cert` and `key`: PEM files of this client's certificate and key, for mTLS."""

    ca: Optional[str] = None
    cert: Optional[str] = None
    key: Optional[str] = None

    def credentials(self) -> grpc.ChannelCredentials:
        if (self.cert is None) != (self.key is None):
            raise ValueError("TLS: give both cert and key for a client certificate, or neither")
        read = lambda path: pathlib.Path(path).read_bytes() if path else None  # noqa: E731
        return grpc.ssl_channel_credentials(
            root_certificates=read(self.ca), private_key=read(self.key), certificate_chain=read(self.cert)
        )


TLSOption = Union[TLS, bool, None]


def _credentials(tls: TLSOption) -> Optional[grpc.ChannelCredentials]:
    """None for plaintext (`tls` None or False), the system roots for True, else as `tls` says."""
    if tls is None or tls is False:
        return None
    return (TLS() if tls is True else tls).credentials()


def channel_to(address: str, tls: TLSOption, server_name: Optional[str] = None) -> grpc.Channel:
    """A channel to `address`: plaintext when `tls` is None or False, TLS with the system roots
    when True, or as a `TLS` says. `server_name`: the name the server's certificate must carry,
    when `address` is one of that name's IP addresses."""
    credentials = _credentials(tls)
    if credentials is None:
        return grpc.insecure_channel(address)
    options = [("grpc.ssl_target_name_override", server_name)] if server_name else None
    return grpc.secure_channel(address, credentials, options=options)


def aio_channel_to(address: str, tls: TLSOption, interceptors: Optional[list] = None) -> "grpc.aio.Channel":
    """`channel_to` for asyncio (`grpc.aio`)."""
    credentials = _credentials(tls)
    if credentials is None:
        return grpc.aio.insecure_channel(address, interceptors=interceptors)
    return grpc.aio.secure_channel(address, credentials, interceptors=interceptors)
