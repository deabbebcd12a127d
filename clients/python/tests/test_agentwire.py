"""The Python client against the real server: generate, a remote input guardrail (tripwire and
nothing saved), a remote stream rewriter, and the failure policy when a processor dies mid-run."""

import threading
import time

import grpc
import pytest

from agentwire import Call, Client, Processor, abort
from agentwire.v1 import memory_pb2, processor_pb2


def test_generate_returns_the_answer(client):
    result = client.generate("echo", "hello from python")
    assert result.text == "echo: hello from python"
    assert result.finish_reason == "stop"
    chunks = [chunk.type for chunk in client.stream("echo", "hi")]
    assert chunks[0] == "start" and chunks[-1] == "finish"


def test_remote_guardrail_trips_and_nothing_is_saved(server, client):
    guard = Processor("word-guard")

    @guard.on("processInput")
    def no_secrets(call):
        if "secret" in call.text:
            return abort("no secrets, please", metadata={"word": "secret"})

    guard.start(server)
    try:
        result = client.generate("guarded", "tell me the secret", thread_id="py-thread", resource_id="ada")
        assert result.finish_reason == "other"
        assert result.tripwire.reason == "no secrets, please"
        assert result.tripwire.processor_id == "word-guard"
        try:
            client.memory.GetThread(memory_pb2.GetThreadRequest(thread_id="py-thread", resource_id="ada"))
            raise AssertionError("the thread should not exist: nothing is saved after a tripwire")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND

        passed = client.generate("guarded", "hello", thread_id="py-thread-2", resource_id="ada")
        assert passed.text == "echo: hello"
    finally:
        guard.stop()


def test_remote_stream_rewriter_changes_the_answer(server, client):
    import examples_path  # noqa: F401  (puts examples/ on the path)
    from stream_redactor import redactor

    redactor.start(server)
    try:
        chunks = list(client.stream("redacted", "call 555 1234"))
        text = "".join(chunk.text_delta.text for chunk in chunks if chunk.type == "text-delta")
        assert text == "echo: call ### ####"
    finally:
        redactor.stop()


def test_processor_death_mid_run_follows_the_failure_policy(server, client):
    flaky = Processor("flaky")
    called = threading.Event()

    @flaky.on("processInput")
    def hang(call):
        called.set()
        time.sleep(30)  # never answers: the process "dies" meanwhile

    flaky.start(server)
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.setdefault("result", client.generate("fragile", "hi")))
    runner.start()
    assert called.wait(10)
    flaky.stop()  # the session ends with the call in flight
    runner.join(10)
    result = outcome["result"]
    assert result.finish_reason == "other"
    assert "flaky" in result.tripwire.reason
    assert "disconnected" in result.tripwire.reason or "unavailable" in result.tripwire.reason


def test_remote_tool_serves_an_agent(server, client):
    import examples_path  # noqa: F401  (puts examples/ on the path)
    from weather_tool import tools

    tools.start(server)
    try:
        chunks = list(client.stream("forecaster", "weather in Paris?"))
        results = [chunk.tool_result for chunk in chunks if chunk.type == "tool-result"]
        assert len(results) == 1 and not results[0].is_error
        assert results[0].result.struct_value["temp"] == 21
        assert results[0].result.struct_value["city"] == "Paris"
        assert "".join(chunk.text_delta.text for chunk in chunks if chunk.type == "text-delta") == "done"
    finally:
        tools.stop()


def test_api_keys_go_with_every_call(keyed_server):
    from agentwire import Client

    with Client(keyed_server, api_key="client-suite-key") as client:
        assert client.generate("echo", "hi", thread_id="t1", resource_id="suite-a").text == "echo: hi"
        thread = client.memory.GetThread(memory_pb2.GetThreadRequest(thread_id="t1", resource_id="suite-a"))
        assert thread.resource_id == "suite-a"
        try:
            client.generate("echo", "hi", resource_id="someone-else")
            raise AssertionError("another resource is out of the key's reach")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    with Client(keyed_server, api_key="") as anonymous:
        try:
            anonymous.generate("echo", "hi")
            raise AssertionError("a call without a key is refused")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED


def test_async_handlers_are_served(server, client):
    guard = Processor("word-guard")

    @guard.on("processInput")
    async def no_secrets(call):
        if "secret" in call.input_text:
            return abort("no secrets, said asynchronously")

    guard.start(server)
    try:
        result = client.generate("guarded", "the secret", thread_id="py-async", resource_id="ada")
        assert result.tripwire.reason == "no secrets, said asynchronously"
    finally:
        guard.stop()


def test_a_bad_answer_fails_the_run_at_once_naming_it(server, client):
    guard = Processor("word-guard")

    @guard.on("processInput")
    def sloppy(call):
        return "blocked"  # not a result: the run fails now, saying so, not after the timeout

    guard.start(server)
    try:
        result = client.generate("guarded", "hi", thread_id="py-bad", resource_id="ada")
        # A failure naming the bug, not the timeout's tripwire.
        assert result.finish_reason == "error" and not result.HasField("tripwire")
        assert "TypeError" in result.error.message and "returned str" in result.error.message, result.error.message
    finally:
        guard.stop()


def test_the_asyncio_client_generates_and_streams(server, keyed_server):
    import asyncio

    from agentwire import AsyncClient

    async def main():
        async with AsyncClient(server) as client:
            result = await client.generate("echo", "hello from asyncio")
            chunks = [chunk.type async for chunk in client.stream("echo", "hi")]
        async with AsyncClient(keyed_server, api_key="client-suite-key") as keyed:
            keyed_result = await keyed.generate("echo", "hi", resource_id="suite-aio")
        return result, chunks, keyed_result

    result, chunks, keyed_result = asyncio.run(main())
    assert result.text == "echo: hello from asyncio"
    assert chunks[0] == "start" and chunks[-1] == "finish"
    assert keyed_result.text == "echo: hi"


def test_one_processor_serves_every_replica(server, second_server):
    """Given several replicas' addresses (a list, and a dns:/// name), the processor keeps a
    session with each, so that a run trips its guard on whichever replica serves it."""
    guard = Processor("word-guard")

    @guard.on("processInput")
    def no_secrets(call):
        if "secret" in call.text:
            return abort("no secrets, please")

    port = second_server.rsplit(":", 1)[1]
    guard.start([server, f"dns:///localhost:{port}"], timeout=5)
    try:
        assert server in guard.connected() and second_server in guard.connected(), guard.connected()
        for address in (server, second_server):
            with Client(address) as client:
                result = client.generate("guarded", "tell me the secret")
                assert result.tripwire.reason == "no secrets, please", address
                assert client.generate("guarded", "hello").text == "echo: hello"
    finally:
        guard.stop()
    assert guard.connected() == []


def test_a_replica_that_goes_away_and_comes_back_is_served_again(server):
    """A replica killed under the processor leaves `connected()` while the others keep their
    session; started again at its address, it is reconnected and its runs are guarded again."""
    import tempfile

    from conftest import CONFIG, spawn

    guard = Processor("word-guard")

    @guard.on("processInput")
    def no_secrets(call):
        if "secret" in call.text:
            return abort("no secrets, please")

    def wait_for(condition, what):
        deadline = time.monotonic() + 20
        while not condition():
            assert time.monotonic() < deadline, f"{what}: connected {guard.connected()}"
            time.sleep(0.05)

    with tempfile.TemporaryDirectory() as data_dir:
        replica, address = spawn(CONFIG, data_dir)
        guard.start([server, address], timeout=5)
        try:
            replica.kill()
            replica.wait(timeout=10)
            wait_for(lambda: guard.connected() == [server], "the killed replica leaves")
            with Client(server) as client:
                assert client.generate("guarded", "the secret").tripwire.reason == "no secrets, please"
            replica, _ = spawn(CONFIG, data_dir, listen=address)
            wait_for(lambda: address in guard.connected(), "the replica, back, is reconnected")
            with Client(address) as client:
                assert client.generate("guarded", "the secret").tripwire.reason == "no secrets, please"
        finally:
            guard.stop()
            replica.kill()
            replica.wait(timeout=10)


def _recorded(client, run_id):
    """The run's record once the server has written it (records are written in batches)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return client.get_run(run_id)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def test_run_records_name_the_processor_that_blocked_a_run(server, client):
    """A run the Python guard stops leaves a record naming it, its hook and reason; list_runs
    finds it by outcome, get_stats counts it, and the asyncio client reads the same."""
    import asyncio

    from agentwire import AsyncClient

    guard = Processor("word-guard")

    @guard.on("processInput")
    def no_secrets(call):
        if "secret" in call.text:
            return abort("no secrets in run records", metadata={"word": "secret"})

    guard.start(server, timeout=5)
    try:
        result = client.generate("guarded", "a secret for the records", resource_id="records-ada")
    finally:
        guard.stop()
    assert result.tripwire.processor_id == "word-guard"
    record = _recorded(client, result.run_id)
    assert record.outcome == "tripwire"
    assert (record.tripwire.processor_id, record.tripwire.reason) == ("word-guard", "no secrets in run records")
    hooks = [entry.hook for entry in record.timeline if entry.WhichOneof("entry") == "hook"]
    blocked = [hook for hook in hooks if hook.processor_id == "word-guard"]
    assert blocked and blocked[0].hook == "processInput" and blocked[0].decision == "abort"
    assert blocked[0].instance_id.startswith("word-guard-")
    listed = [run.run_id for run in client.list_runs(agent_id="guarded", outcome="tripwire", page_size=1)]
    assert result.run_id in listed
    stats = client.get_stats(agent_id="guarded", bucket_ms=60_000)
    assert any(t.processor_id == "word-guard" and t.reason == "no secrets in run records" for t in stats.tripwires)
    assert sum(bucket.tripwires.get("word-guard", 0) for bucket in stats.buckets) >= 1

    async def read():
        async with AsyncClient(server) as aio:
            fetched = await aio.get_run(result.run_id)
            runs = [run.run_id async for run in aio.list_runs(resource_id="records-ada")]
        return fetched, runs

    fetched, runs = asyncio.run(read())
    assert fetched.tripwire.processor_id == "word-guard"
    assert runs == [result.run_id]


def test_a_warning_streams_and_stays_in_the_run_record(server, client):
    """call.warn streams a transient data chunk to the client and leaves a warning in the run's
    record with the processor, hook, message and details, without stopping the run; a kind the
    server would refuse is refused in Python already."""
    guard = Processor("word-guard")

    @guard.on("processInput")
    def tone(call):
        if "now" in call.text:
            call.warn("tone", "the user is in a hurry", {"word": "now"})

    guard.start(server, timeout=5)
    try:
        result = client.generate("guarded", "answer me now", resource_id="records-warned")
    finally:
        guard.stop()
    assert not result.HasField("tripwire")
    assert any(chunk.type == "data-tone" for chunk in result.data)
    record = _recorded(client, result.run_id)
    warnings = [entry.warning for entry in record.timeline if entry.WhichOneof("entry") == "warning"]
    assert [(w.processor_id, w.hook, w.kind, w.message) for w in warnings] == [
        ("word-guard", "processInput", "tone", "the user is in a hurry")
    ]
    assert warnings[0].details.struct_value["word"] == "now"
    with pytest.raises(ValueError, match="warning kinds"):
        Call(processor_pb2.HookCall()).warn("Not A Kind", "refused")


def test_watch_runs_streams_a_run_as_it_begins_and_ends(server, client):
    """watch_runs yields a run's started event and then its ended record, for runs made while it
    watches (runs are made until the watch has seen one whole)."""
    started, whole = set(), []
    watch = client.watch_runs(resource_id="records-watch")

    def read():
        for event in watch:
            kind = event.WhichOneof("event")
            if kind == "started":
                started.add(event.started.run_id)
            elif kind == "ended" and event.ended.run_id in started:
                whole.append(event.ended)
                return

    reader = threading.Thread(target=read)
    reader.start()
    made = []
    deadline = time.monotonic() + 10
    while reader.is_alive() and time.monotonic() < deadline:
        made.append(client.generate("echo", "watched", resource_id="records-watch").run_id)
        reader.join(timeout=0.1)
    watch.cancel()
    reader.join(timeout=5)
    assert whole, "a run was seen beginning and ending"
    assert whole[0].run_id in made and whole[0].outcome == "finished"
    assert whole[0].resource_id == "records-watch"


def test_backoff_starts_again_after_a_welcomed_session():
    """The reconnect wait doubles only while sessions fail before their welcome: after a session
    the server welcomed (a server that restarted) it is back to 0.1 s, never left at 4.56 s."""
    from agentwire.processor import Backoff

    backoff = Backoff()
    waits = [backoff.after(welcomed=welcomed) for welcomed in (False, False, False, True, False)]
    assert waits == [0.1, 0.2, 0.4, 0.1, 0.2]
    for _ in range(20):
        backoff.after(welcomed=False)
    assert backoff.after(welcomed=False) == 5.0
