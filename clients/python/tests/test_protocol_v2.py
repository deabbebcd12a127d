"""Protocol version 2 from Python, against the real server: one test per capability a remote
processor gained — tagged system messages, data parts, answering in the model's place, a step's
settings seen and changed, a failed tool, repaired messages before an API-error retry, and the
steps and message sources of a call."""

import json
from contextlib import contextmanager

from agentwire import Processor, replace, retry_api_call, text_delta
from agentwire.v1 import agent_pb2


def user(text):
    return agent_pb2.Message(role="user", parts=[agent_pb2.Part(text=agent_pb2.TextPart(text=text))])


@contextmanager
def serving(server, processor):
    processor.start(server)
    try:
        yield processor
    finally:
        processor.stop()


def test_tagged_system_messages_survive_into_the_next_step(server, client):
    v2, seen = Processor("v2"), []

    @v2.on("processInputStep")
    def step(call):
        if call.step == 0:
            return replace(tagged_system_messages={"policy": "Answer in French."})
        seen.append([(tagged.tag, tagged.text) for tagged in call.tagged_system_messages])
        return replace(model="mock/inspect")

    with serving(server, v2):
        answer = json.loads(client.generate("v2-tagged", "1 + 1?").text)
    assert seen == [[("policy", "Answer in French.")]]
    assert answer["system"] == ["Answer in French."]


def test_data_parts_reach_a_stream_processor_that_asks(server, client):
    v2, types = Processor("v2"), []

    @v2.on("processInput")
    def audit(call):
        call.emit("data-audit", {"checked": True})

    @v2.on("processOutputStream", data_parts=True)
    def watch(call):
        types.append(call.part.type)

    with serving(server, v2):
        client.generate("v2-data", "hi")
    assert "data-audit" in types, types


def test_process_llm_request_answers_in_the_models_place(server, client):
    v2 = Processor("v2")

    @v2.on("processLLMRequest")
    def cached(call):
        return replace(response=[text_delta("from "), text_delta("the cache")])

    with serving(server, v2):
        result = client.generate("v2-cache", "hello")
    assert result.finish_reason == "stop"
    assert result.text == "from the cache"


def test_every_setting_of_a_step_is_seen_and_changed(server, client):
    v2, seen = Processor("v2"), {}

    @v2.on("processInputStep")
    def narrow(call):
        seen["tools"] = [tool.name for tool in call.step_input.tools]
        seen["temperature"] = call.step_input.settings.temperature
        return replace(
            tools=[{"name": "lookup", "description": "Looks things up"}],
            model_settings={"temperature": 0.9},
            provider_options={"reasoning_effort": "low"},
            structured_output={"type": "object"},
            tool_choice="required",
        )

    @v2.on("processLLMRequest")
    def request(call):
        seen["sent_tools"] = [tool.name for tool in call.step_input.tools]
        seen["sent_choice"] = call.step_input.tool_choice

    with serving(server, v2):
        answer = json.loads(client.generate("v2-settings", "look it up").text)
    assert seen == {"tools": ["calculator"], "temperature": 0.3, "sent_tools": ["lookup"], "sent_choice": "required"}
    assert answer["tools"] == ["lookup"]
    assert answer["settings"]["temperature"] == 0.9
    assert answer["provider_options"] == {"reasoning_effort": "low"}
    assert answer["structured_output"] == {"type": "object"}


def test_tool_failures_steps_and_sources_are_shown(server, client):
    v2, seen = Processor("v2"), []

    @v2.on("processToolResult")
    def tool(call):
        seen.append(f"tool is_error {call.tool_result.is_error}")

    @v2.on("processOutputStep")
    def step(call):
        seen.append(f"step {call.step} steps {[len(step.tool_calls) for step in call.steps]} sources {sorted(set(call.sources))}")

    with serving(server, v2):
        assert client.generate("v2-tool-error", "1 +").text == "sorry"
    assert seen == [
        "step 0 steps [1] sources ['input', 'response']",
        "tool is_error True",
        "step 1 steps [1, 0] sources ['input', 'response']",
    ]


def test_process_api_error_repairs_the_messages_before_the_retry(server, client):
    v2 = Processor("v2")

    @v2.on("processAPIError")
    def shorten(call):
        return retry_api_call(messages=[user("a shorter question")])

    @v2.on("processInputStep")
    def inspect_retry(call):
        if call.retry_count > 0:
            return replace(model="mock/inspect")

    with serving(server, v2):
        answer = json.loads(client.generate("v2-repair", "a very long question").text)
    assert [message["text"] for message in answer["messages"]] == ["a shorter question"]
