"""Starts the real agentwire binary on a free port for the tests, with the config all client
suites share (clients/testdata/agentwire.toml), which names the processors the tests serve."""

import os
import pathlib
import subprocess
import tempfile

import pytest

from agentwire import Client

ROOT = pathlib.Path(__file__).resolve().parents[3]
BINARY = os.environ.get("AGENTWIRE_BIN", str(ROOT / "target" / "debug" / "agentwire"))

CONFIG = ROOT / "clients" / "testdata" / "agentwire.toml"


KEYED_CONFIG = ROOT / "clients" / "testdata" / "keyed.toml"


def spawn(config, data_dir, listen="127.0.0.1:0"):
    """Starts a server; returns its process and address once it listens."""
    process = subprocess.Popen(
        [BINARY, "serve", "--listen", listen, "--config", str(config), "--data-dir", data_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    ready = process.stdout.readline().strip()
    assert ready.startswith("agentwire listening on "), ready
    return process, ready.removeprefix("agentwire listening on ")


def _serve(config):
    with tempfile.TemporaryDirectory() as data_dir:
        process, address = spawn(config, data_dir)
        try:
            yield address
        finally:
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def server():
    yield from _serve(CONFIG)


@pytest.fixture(scope="session")
def second_server():
    """Another replica of the same config (its own data: the point is the processor's sessions)."""
    yield from _serve(CONFIG)


@pytest.fixture(scope="session")
def keyed_server():
    """A server with API keys (clients/testdata/keyed.toml)."""
    yield from _serve(KEYED_CONFIG)


@pytest.fixture()
def client(server):
    with Client(server) as client:
        yield client
