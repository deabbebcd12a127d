//! Aborts and failures: an abort in any hook ends the run with one `tripwire` chunk (finish
//! reason `other` on the unary call); a processor that breaks ends it with an error chunk that
//! names it; neither takes the server down.

use crate::common;

use agentwire::domain::Hook;
use agentwire::server::pb;
use common::{TestServer, error, names, request, tripwire, types};

const CONFIG: &str = r#"
[[agents]]
id = "tools"
model = "mock/script"
tools = ["calculator"]
script = [
  { tool_calls = [{ name = "calculator", args = { expression = "1 + 1" } }] },
  { text = "done" },
]

[[agents]]
id = "rejected"
model = "mock/script"
script = [{ error = { status = 400, message = "bad request" } }]

[[agents]]
id = "echo"
model = "mock/echo"
"#;

/// The config with one `abort-in` (or `fail-in`) definition per hook, named `<prefix><hook>`.
fn config_with_traps() -> String {
    let mut config = CONFIG.to_owned();
    for hook in Hook::ALL {
        for kind in ["abort-in", "fail-in"] {
            config.push_str(&format!("\n[processors.{kind}-{hook}]\nkind = \"{kind}\"\nhook = \"{hook}\"\n"));
        }
    }
    for hook in Hook::ALL {
        config.push_str(&format!(
            "\n[processors.silent-in-{hook}]\nkind = \"abort-in\"\nhook = \"{hook}\"\nsilent = true\n"
        ));
    }
    config.push_str(
        "\n[processors.panic-in-processInput]\nkind = \"fail-in\"\nhook = \"processInput\"\npanic = true\n",
    );
    config
}

/// A run of the agent that reaches `hook`, with `processor` in the list that serves it.
fn run_reaching(hook: Hook, processor: &str) -> pb::RunRequest {
    let agent = if hook == Hook::ProcessApiError { "rejected" } else { "tools" };
    let mut run = request(agent, "1 + 1?");
    match hook {
        Hook::ProcessInput | Hook::ProcessInputStep | Hook::ProcessLlmRequest | Hook::ProcessLlmResponse => {
            run.input_processors = names(&[processor]);
        }
        Hook::ProcessApiError => run.error_processors = names(&[processor]),
        Hook::ProcessOutputStream
        | Hook::ProcessOutputStep
        | Hook::ProcessToolResult
        | Hook::ProcessOutputResult => {
            run.output_processors = names(&[processor]);
        }
    }
    run
}

/// An abort in each of the nine hooks ends the stream with exactly one tripwire chunk carrying
/// the reason, the metadata and the processor id, and no `finish`; the unary call reports
/// finish reason `other`, an empty text and no messages.
#[tokio::test]
async fn an_abort_in_any_hook_ends_the_run_in_a_tripwire() {
    let server = TestServer::start(&config_with_traps()).await;
    for hook in Hook::ALL {
        let processor = format!("abort-in-{hook}");
        let chunks = server.stream(run_reaching(hook, &processor)).await;
        let tripwire = tripwire(&chunks)
            .unwrap_or_else(|| panic!("{hook}: tripwire expected, got {:?}", types(&chunks)));
        assert_eq!(tripwire.reason, format!("aborted in {hook}"));
        assert_eq!(tripwire.processor_id, processor);
        assert_eq!(common::json(&tripwire.metadata)["hook"], hook.name());
        assert!(!tripwire.retry);
        let chunk_types = types(&chunks);
        assert_eq!(chunk_types.iter().filter(|kind| *kind == "tripwire").count(), 1, "{hook}");
        assert!(!chunk_types.contains(&"finish".to_owned()), "{hook}: no finish after a tripwire");

        let result = server.generate(run_reaching(hook, &processor)).await;
        assert_eq!(result.finish_reason, "other", "{hook}");
        assert_eq!(result.text, "", "{hook}");
        assert_eq!(result.tripwire.expect("tripwire").processor_id, processor);
        assert!(result.messages.is_empty(), "{hook}: nothing is kept after a tripwire");
    }
}

/// An abort without a reason gets one default wording, whatever the hook (Mastra words the
/// stream hook's differently).
#[tokio::test]
async fn an_abort_without_a_reason_names_the_processor_in_every_hook() {
    let server = TestServer::start(&config_with_traps()).await;
    for hook in Hook::ALL {
        let processor = format!("silent-in-{hook}");
        let chunks = server.stream(run_reaching(hook, &processor)).await;
        let tripwire = tripwire(&chunks).unwrap_or_else(|| panic!("{hook}: tripwire expected"));
        assert_eq!(tripwire.reason, format!("Tripwire triggered by {processor}"), "{hook}");
    }
}

/// An input abort stops the run before anything is streamed: only its tripwire goes out (with
/// the run's id), the model is never called, and output processors never see the run.
#[tokio::test]
async fn an_input_abort_streams_only_its_tripwire() {
    let server = TestServer::start(&config_with_traps()).await;
    let mut run = run_reaching(Hook::ProcessInput, "abort-in-processInput");
    run.output_processors = names(&["probe"]);
    let chunks = server.stream(run).await;
    assert_eq!(types(&chunks), ["tripwire"]);
    assert!(!chunks[0].run_id.is_empty(), "the tripwire names the run");
    assert!(server.log.with_prefix("probe:").is_empty(), "{:?}", server.log.entries());
}

/// A processor that breaks in any hook ends the run with an error chunk naming it and the hook.
#[tokio::test]
async fn a_broken_processor_ends_the_run_with_an_error_naming_it() {
    let server = TestServer::start(&config_with_traps()).await;
    for hook in Hook::ALL {
        let processor = format!("fail-in-{hook}");
        let chunks = server.stream(run_reaching(hook, &processor)).await;
        let failure =
            error(&chunks).unwrap_or_else(|| panic!("{hook}: error expected, got {:?}", types(&chunks)));
        assert_eq!(failure.source, "processor");
        assert_eq!(failure.origin, processor);
        assert_eq!(
            failure.message,
            format!("processor `{processor}` failed in {hook}: returned malformed data")
        );
        let result = server.generate(run_reaching(hook, &processor)).await;
        assert_eq!(result.finish_reason, "error");
    }
}

/// A panicking processor fails its run, not the server: the next run works.
#[tokio::test]
async fn a_panicking_processor_does_not_take_the_server_down() {
    let server = TestServer::start(&config_with_traps()).await;
    let chunks = server.stream(run_reaching(Hook::ProcessInput, "panic-in-processInput")).await;
    let failure = error(&chunks).expect("an error chunk");
    assert!(failure.message.contains("panicked"), "{}", failure.message);
    let result = server.generate(request("echo", "still there?")).await;
    assert_eq!(result.text, "echo: still there?");
}
