//! `processAPIError`: error processors see a rejected model call, may repair the messages and ask
//! for a retry, within a bounded budget; without them the run ends with an error chunk.

use crate::common;

use std::sync::Arc;

use agentwire::domain::{Hook, HookSet};
use agentwire::model::ModelError;
use agentwire::processor::{ApiErrorArgs, ApiErrorOutcome, HookError, Processor};
use common::{Log, TestServer, TestServerBuilder, error, names, request, types};

const CONFIG: &str = r#"
[processors.recover]
kind = "recover"

[processors.watcher]
kind = "probe"

[[agents]]
id = "flaky"
model = "mock/script"
error_processors = ["recover"]
script = [
  { error = { status = 400, message = "context length exceeded" } },
  { text = "recovered" },
]

[[agents]]
id = "broken"
model = "mock/script"
error_processors = ["recover"]
script = [{ error = { status = 400, message = "always rejected" } }]
"#;

fn builder() -> TestServerBuilder {
    TestServer::builder(CONFIG).kind("recover", |id, _, log| Arc::new(Recover { id: id.to_owned(), log }))
}

/// An error processor that asks for a retry after a scripted 400 gets the model called again.
#[tokio::test]
async fn process_api_error_retry_recovers_from_a_rejection() {
    let server = builder().start().await;
    let result = server.generate(request("flaky", "a very long question")).await;
    assert_eq!(result.text, "recovered");
    assert_eq!(result.finish_reason, "stop");
    assert_eq!(
        server.log.with_prefix("recover:"),
        ["recover:status 400: context length exceeded (retry 0, 1 messages)"]
    );
}

/// A retried API call is framed like a retried step: the failed attempt streams its
/// `step-start` and a `step-finish` saying who asked for the retry, `steps` holds a retry entry
/// for it, and the attempt again runs `processInputStep` and `processLLMRequest` on the same step
/// with `retry_count` + 1.
#[tokio::test]
async fn a_retried_api_call_is_framed_and_runs_the_step_hooks_again() {
    let server = builder().start().await;
    let mut run = request("flaky", "a very long question");
    run.input_processors = names(&["watcher"]);
    let chunks = server.stream(run.clone()).await;
    let framing: Vec<String> =
        types(&chunks).into_iter().filter(|kind| kind.starts_with("step-") || kind == "finish").collect();
    assert_eq!(framing, ["step-start", "step-finish", "step-start", "step-finish", "finish"]);
    let retried = chunks
        .iter()
        .find_map(|chunk| match &chunk.payload {
            Some(agentwire::server::pb::chunk::Payload::StepFinish(finish)) => finish.rejected.clone(),
            _ => None,
        })
        .expect("the first step-finish says the call was retried");
    assert_eq!(retried.processor_id, "recover");
    assert!(retried.retry && retried.reason.contains("context length exceeded"), "{retried:?}");

    let result = server.generate(run).await;
    assert_eq!(result.text, "recovered");
    let steps: Vec<(u32, &str, bool)> = result
        .steps
        .iter()
        .map(|step| (step.step, step.finish_reason.as_str(), step.tripwire.is_some()))
        .collect();
    assert_eq!(steps, [(0, "error", true), (0, "stop", false)]);
    let step_hooks: Vec<String> = server
        .log
        .entries()
        .into_iter()
        .filter(|entry| {
            entry.starts_with("watcher:processInputStep") || entry.starts_with("watcher:processLLMRequest")
        })
        .collect();
    let once = ["watcher:processInputStep:0", "watcher:processLLMRequest:0"];
    assert_eq!(step_hooks, [once, once, once, once].concat(), "each attempt of both runs");
}

/// Without an error processor the rejection ends the run with an error chunk that names the
/// model and the status; `processAPIError` of input processors is never called.
#[tokio::test]
async fn unrecovered_rejection_ends_the_run_with_an_error() {
    let server = builder().start().await;
    let mut run = request("flaky", "hi");
    run.error_processors = names(&[]);
    run.input_processors = names(&["watcher"]);
    let chunks = server.stream(run.clone()).await;
    let failure = error(&chunks).expect("an error chunk ends the stream");
    assert_eq!(failure.source, "model");
    assert!(
        failure.message.contains("mock/script") && failure.message.contains("400"),
        "{}",
        failure.message
    );
    assert!(failure.message.contains("context length exceeded"));
    assert!(server.log.with_prefix("watcher:processAPIError").is_empty());

    let result = server.generate(run).await;
    assert_eq!(result.finish_reason, "error");
    assert!(result.error.unwrap().message.contains("400"));
    assert!(result.messages.is_empty());
}

/// Error-processor retries default to 10 (the seed's default when error processors are
/// configured) and follow `max_processor_retries` when set; a warning says when a processor asks
/// for a retry with no budget set and when a budget runs out.
#[tokio::test]
async fn process_api_error_retries_are_bounded() {
    let logs = common::logs::capture();
    let server = builder().start().await;
    let result = server.generate(request("broken", "hi")).await;
    assert_eq!(result.finish_reason, "error");
    assert_eq!(server.log.with_prefix("recover:").len(), 11, "10 retries, then the error stands");
    let warnings = logs.lines_with("WARN");
    assert!(warnings.iter().any(|line| line.contains("max_processor_retries is not set")), "{warnings:?}");
    assert!(warnings.iter().any(|line| line.contains("retry budget of 10 ran out")), "{warnings:?}");

    let bounded_server = builder().start().await;
    let mut run = request("broken", "hi");
    run.max_processor_retries = Some(1);
    bounded_server.generate(run).await;
    assert_eq!(bounded_server.log.with_prefix("recover:").len(), 2);
}

/// Asks for a retry every time, logging what it saw.
struct Recover {
    id: String,
    log: Log,
}

#[async_trait::async_trait]
impl Processor for Recover {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessApiError])
    }

    async fn process_api_error(&self, args: ApiErrorArgs<'_>) -> Result<ApiErrorOutcome, HookError> {
        let ModelError::Rejected { status, message, .. } = args.error else { panic!("a rejection") };
        self.log.push(format!(
            "{}:status {status}: {message} (retry {}, {} messages)",
            self.id,
            args.ctx.retry_count,
            args.messages.len()
        ));
        Ok(ApiErrorOutcome { retry: true })
    }
}
