"""From a clean directory, as the README says: install the package into a new virtualenv, run the
README's ten-line guard over TLS with a processor token, and watch a run end in a tripwire with
nothing saved."""

import os
import pathlib
import re
import secrets
import shutil
import subprocess
import sys
import tempfile

import grpc
import pytest

from agentwire import TLS, Client
from agentwire.v1 import memory_pb2

from conftest import BINARY, ROOT

HERE = pathlib.Path(__file__).resolve().parents[1]


def readme_block(heading):
    """The first python code block under `heading` in the README."""
    text = (HERE / "README.md").read_text()
    section = text.split(f"## {heading}\n", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _tls_server(config):
    with tempfile.TemporaryDirectory() as work:
        work = pathlib.Path(work)
        subprocess.run([str(ROOT / "clients" / "testdata" / "tls.sh"), str(work)], check=True)
        token = secrets.token_hex(16)
        env = dict(os.environ, AGENTWIRE_TEST_PROCESSOR_TOKEN=token)
        server = subprocess.Popen(
            [BINARY, "serve", "--listen", "127.0.0.1:0", "--config", str(work / config), "--data-dir", str(work / "data")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )
        ready = server.stdout.readline().strip()
        assert ready.startswith("agentwire listening on "), ready
        try:
            yield work, ready.removeprefix("agentwire listening on "), token
        finally:
            server.terminate()
            server.wait(timeout=10)


@pytest.fixture(scope="module")
def tls_server():
    yield from _tls_server("tls.toml")


@pytest.fixture(scope="module")
def mtls_server():
    yield from _tls_server("mtls.toml")


def test_a_fresh_install_blocks_a_word_over_tls(tls_server):
    work, address, token = tls_server
    app = work / "app"
    app.mkdir()
    subprocess.run([sys.executable, "-m", "venv", str(app / "venv")], check=True)
    pip = [str(app / "venv" / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
    # From a copy of the package's files, so that the build leaves nothing in the checkout.
    checkout = work / "checkout"
    shutil.copytree(HERE, checkout, ignore=shutil.ignore_patterns(".venv", "build", "*.egg-info", "__pycache__"))
    subprocess.run(pip + [str(checkout)], check=True, cwd=app)
    (app / "ca.pem").write_text((work / "ca.pem").read_text())
    (app / "guard.py").write_text(readme_block("A ten-line guard").replace('"127.0.0.1:50051"', repr(address)))
    guard = subprocess.Popen(
        [str(app / "venv" / "bin" / "python"), "guard.py"], cwd=app, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, AGENTWIRE_PROCESSOR_TOKEN=token, PYTHONPATH=""),
    )
    try:
        line = guard.stderr.readline()
        assert line.startswith("agentwire: connected as word-guard (instance word-guard-"), line
        assert f"to {address}, protocol 2" in line, line
        with Client(address, tls=TLS(ca=str(work / "ca.pem"))) as client:
            result = client.generate("remote-guarded", "tell me the secret", thread_id="fresh", resource_id="ada")
            assert result.finish_reason == "other"
            assert (result.tripwire.processor_id, result.tripwire.reason) == ("word-guard", "no secrets, please")
            with pytest.raises(grpc.RpcError) as missing:
                client.memory.GetThread(memory_pb2.GetThreadRequest(thread_id="fresh", resource_id="ada"))
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
            assert client.generate("remote-guarded", "hello", thread_id="fresh-2", resource_id="ada").text == "echo: hello"
    finally:
        guard.terminate()
        guard.wait(timeout=10)


def test_a_wrong_token_is_refused_and_said(tls_server):
    from agentwire import Processor, abort

    work, address, _token = tls_server
    guard = Processor("word-guard", token="not-the-token", tls=TLS(ca=str(work / "ca.pem")))
    guard.on("processInput")(lambda call: abort("never"))
    with pytest.raises(grpc.RpcError) as refused:
        guard.run(address)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_mtls_takes_a_client_certificate(mtls_server):
    work, address, token = mtls_server
    with_cert = TLS(ca=str(work / "ca.pem"), cert=str(work / "client.pem"), key=str(work / "client.key"))
    with Client(address, tls=with_cert) as client:
        # Through TLS to the run: no guard is connected, so word-guard's closed policy trips it.
        assert "unavailable" in client.generate("remote-guarded", "hi").tripwire.reason
    with Client(address, tls=TLS(ca=str(work / "ca.pem"))) as anonymous:
        with pytest.raises(grpc.RpcError) as refused:
            anonymous.generate("remote-guarded", "hi")
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
