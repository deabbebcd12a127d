"""Starts the real agentwire binary on a free port for the tests, with a config naming the
processors the tests serve."""

import os
import pathlib
import subprocess
import tempfile

import pytest

from agentwire import Client

ROOT = pathlib.Path(__file__).resolve().parents[3]
BINARY = os.environ.get("AGENTWIRE_BIN", str(ROOT / "target" / "debug" / "agentwire"))

CONFIG = """
[processors.word-guard]
kind = "remote"
timeout_ms = 3000

[processors.digit-redactor]
kind = "remote"
timeout_ms = 3000

[processors.flaky]
kind = "remote"
timeout_ms = 3000

[[agents]]
id = "echo"
model = "mock/echo"

[[agents]]
id = "guarded"
model = "mock/echo"
input_processors = ["word-guard"]
memory = {}

[[agents]]
id = "redacted"
model = "mock/echo"
output_processors = ["digit-redactor"]

[[agents]]
id = "fragile"
model = "mock/echo"
input_processors = ["flaky"]
"""


@pytest.fixture(scope="session")
def server():
    with tempfile.TemporaryDirectory() as data_dir:
        config = pathlib.Path(data_dir) / "agentwire.toml"
        config.write_text(CONFIG)
        process = subprocess.Popen(
            [BINARY, "serve", "--listen", "127.0.0.1:0", "--config", str(config), "--data-dir", data_dir],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        ready = process.stdout.readline().strip()
        assert ready.startswith("agentwire listening on "), ready
        address = ready.removeprefix("agentwire listening on ")
        try:
            yield address
        finally:
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture()
def client(server):
    with Client(server) as client:
        yield client
