//! Where each hook runs in a run, and the order of processors within a hook.

use crate::common;

use common::{TestServer, request};

const CONFIG: &str = r#"
[processors.in]
kind = "probe"

[processors.out]
kind = "probe"

[processors.first]
kind = "probe"

[processors.second]
kind = "probe"

[[agents]]
id = "calc"
model = "mock/script"
tools = ["calculator"]
input_processors = ["in"]
output_processors = ["out"]
script = [
  { tool_calls = [{ name = "calculator", args = { expression = "2 + 2" } }] },
  { text = "It is 4" },
]

[[agents]]
id = "ordered"
model = "mock/echo"
input_processors = ["first", "second"]
output_processors = ["first", "second"]
"#;

/// Every hook runs at its point of the seed's flow: input once, then per step input step, LLM
/// request, the stream, LLM response, output step, tools with their results, and the output
/// result once before `finish`.
#[tokio::test]
async fn hooks_run_at_their_points_in_a_two_step_run() {
    let server = TestServer::start(CONFIG).await;
    let result = server.generate(request("calc", "2 + 2?")).await;
    assert_eq!(result.text, "It is 4");
    let expected = [
        "in:processInput",
        "out:processOutputStream:start",
        "in:processInputStep:0",
        "in:processLLMRequest:0",
        "out:processOutputStream:step-start",
        "out:processOutputStream:tool-call",
        "in:processLLMResponse:0",
        "out:processOutputStep:0",
        "out:processToolResult:calculator",
        "out:processOutputStream:tool-result",
        "out:processOutputStream:step-finish",
        "in:processInputStep:1",
        "in:processLLMRequest:1",
        "out:processOutputStream:step-start",
        "out:processOutputStream:text-delta",
        "out:processOutputStream:text-delta",
        "out:processOutputStream:text-delta",
        "in:processLLMResponse:1",
        "out:processOutputStep:1",
        "out:processOutputStream:step-finish",
        "out:processOutputResult",
        "out:processOutputStream:finish",
    ];
    assert_eq!(server.log.entries(), expected);
}

/// Within each hook, processors run in the order the agent lists them.
#[tokio::test]
async fn processors_run_in_list_order_within_each_hook() {
    let server = TestServer::start(CONFIG).await;
    server.generate(request("ordered", "hi")).await;
    let entries = server.log.entries();
    assert!(!entries.is_empty());
    for pair in entries.chunks(2) {
        let first = pair[0].strip_prefix("first:").expect("`first` runs first");
        let second = pair[1].strip_prefix("second:").expect("then `second`");
        assert_eq!(first, second, "both ran the same hook call");
    }
}
