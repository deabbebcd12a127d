//! Run records through the real server (`RunService`): every run leaves one — finished,
//! tripwire, error, cancelled, timed out — with its timeline of hook, model and tool calls and
//! what each decided (remote skips, timeouts and instances included) and what processors warned
//! of; `ListRuns` filters and pages them, keys see only their resources' runs, retention and `DeleteResource` remove them.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire::server::pb;
use agentwire::server::pb::run_service_client::RunServiceClient;
use agentwire::server::pb::timeline_entry::Entry;
use common::remote::{cont, serve};
use common::{TestServer, in_thread, request};
use tonic::{Code, Request};

const CONFIG: &str = r#"
[limits]
max_run_ms = 300

[processors.guard]
kind = "abort-in"
hook = "processInput"

[processors.broken]
kind = "fail-in"
hook = "processOutputResult"

[processors.late]
kind = "remote"
timeout_ms = 200
on_failure = "open"

[processors.mute]
kind = "remote"
timeout_ms = 200

[processors.word-guard]
kind = "remote"

[[agents]]
id = "echo"
model = "mock/echo"
input_processors = ["probe"]
output_processors = ["probe"]
memory = { last_messages = 2 }

[[agents]]
id = "guarded"
model = "mock/echo"
input_processors = ["probe", "guard"]
memory = { last_messages = 2 }

[[agents]]
id = "broken"
model = "mock/echo"
output_processors = ["broken"]

[[agents]]
id = "rejected"
model = "mock/script"
script = [{ error = { status = 400, message = "bad request" } }]

[[agents]]
id = "tools"
model = "mock/script"
tools = ["calculator"]
script = [
  { tool_calls = [{ name = "calculator", args = { expression = "1 + 1" } }] },
  { text = "two" },
]

[[agents]]
id = "slow"
model = "mock/script"
script = [{ text = "one two three four five six seven eight nine ten", chunk_delay_ms = 100 }]

[[agents]]
id = "remote"
model = "mock/echo"
input_processors = ["late", "word-guard"]

[processors.short]
kind = "token-limiter"
output_limit = 3

[processors.nfkc]
kind = "unicode-normalizer"

[processors.digits]
kind = "regex-filter"
patterns = [{ name = "digits", pattern = "[0-9]{4}" }]

[[agents]]
id = "rewriting"
model = "mock/echo"
input_processors = ["nfkc"]
output_processors = ["digits", "short"]

[[agents]]
id = "muted"
model = "mock/echo"
input_processors = ["mute"]

[processors.pii-warn]
kind = "pii-detector"
strategy = "warn"
detectors = ["email"]

[processors.warner]
kind = "remote"

[[agents]]
id = "kept"
model = "mock/echo"
instructions = "Be brief."
record = { content = true }

[[agents]]
id = "warned"
model = "mock/echo"
input_processors = ["pii-warn", "warner"]
output_processors = ["pii-warn"]
"#;

/// `message` sent with API key `key`.
fn with_key<T>(key: &str, message: T) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
    request
}

async fn runs(server: &TestServer) -> RunServiceClient<tonic::transport::Channel> {
    RunServiceClient::new(server.channel().await)
}

/// The record of `run_id`, once the writer has stored it.
async fn record(server: &TestServer, run_id: &str) -> pb::RunRecord {
    let mut client = runs(server).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.get_run(pb::GetRunRequest { run_id: run_id.into() }).await {
            Ok(record) => return record.into_inner(),
            Err(status) if status.code() == Code::NotFound && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(status) => panic!("GetRun {run_id}: {status}"),
        }
    }
}

/// The hook entries of a record as `processor:hook:decision` (with the step when it has one).
fn hooks(record: &pb::RunRecord) -> Vec<String> {
    record
        .timeline
        .iter()
        .filter_map(|entry| match &entry.entry {
            Some(Entry::Hook(call)) => Some(match call.step {
                Some(step) => format!("{}:{}@{step}:{}", call.processor_id, call.hook, call.decision),
                None => format!("{}:{}:{}", call.processor_id, call.hook, call.decision),
            }),
            _ => None,
        })
        .collect()
}

fn hook_entry<'a>(record: &'a pb::RunRecord, processor: &str) -> &'a pb::HookCallEntry {
    record
        .timeline
        .iter()
        .find_map(|entry| match &entry.entry {
            Some(Entry::Hook(call)) if call.processor_id == processor => Some(call),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no hook entry of {processor}: {:?}", hooks(record)))
}

fn model_entries(record: &pb::RunRecord) -> Vec<&pb::ModelCallEntry> {
    record
        .timeline
        .iter()
        .filter_map(|entry| match &entry.entry {
            Some(Entry::Model(call)) => Some(call),
            _ => None,
        })
        .collect()
}

/// A finished run's record names its agent, thread and resource and holds every hook call in
/// order — each stream call of the step counted in one entry — and the model call with its
/// usage; `ListRuns` shows it.
#[tokio::test]
async fn a_finished_run_leaves_its_timeline() {
    let server = TestServer::start(CONFIG).await;
    let result = server.generate(in_thread("echo", "hello there friend", "t1")).await;
    let record = record(&server, &result.run_id).await;
    assert_eq!(
        (
            record.outcome.as_str(),
            record.agent_id.as_str(),
            record.thread_id.as_str(),
            record.resource_id.as_str()
        ),
        ("finished", "echo", "t1", "alice")
    );
    assert_eq!(record.finish_reason, "stop");
    assert!(record.ended_at >= record.started_at && record.started_at > 0);
    let calls = hooks(&record);
    for expected in [
        "probe:processInput:continue",
        "probe:processInputStep@0:continue",
        "probe:processOutputStream@0:continue",
        "probe:processOutputResult:continue",
    ] {
        assert!(calls.contains(&expected.to_owned()), "{expected} in {calls:?}");
    }
    let stream = record
        .timeline
        .iter()
        .find_map(|entry| match &entry.entry {
            Some(Entry::Hook(call)) if call.hook == "processOutputStream" && call.step == Some(0) => {
                Some(call)
            }
            _ => None,
        })
        .unwrap();
    assert!(stream.calls >= 3, "every chunk of the step counted in one entry: {stream:?}");
    // One entry in the step, one for the `start` and `finish` chunks around the steps.
    assert_eq!(calls.iter().filter(|call| call.contains("processOutputStream")).count(), 2, "{calls:?}");
    let models = model_entries(&record);
    assert_eq!(models.len(), 1);
    assert_eq!((models[0].model.as_str(), models[0].step), ("mock/echo", 0));
    assert_eq!(models[0].usage, record.usage);
    assert!(record.timeline.windows(2).all(|pair| pair[0].at_us <= pair[1].at_us), "in order of start");

    let listed = runs(&server).await.list_runs(pb::ListRunsRequest::default()).await.unwrap().into_inner();
    assert_eq!(listed.runs.len(), 1);
    assert_eq!(listed.runs[0].run_id, result.run_id);
    assert!(listed.runs[0].timeline.is_empty(), "a list leaves the timelines to GetRun");
}

/// A tripwire's record says which processor stopped the run, in which hook, why, with its
/// metadata; no model was called.
#[tokio::test]
async fn a_tripwire_names_the_processor_hook_and_reason() {
    let server = TestServer::start(CONFIG).await;
    let result = server.generate(in_thread("guarded", "hi", "t2")).await;
    let record = record(&server, &result.run_id).await;
    assert_eq!(record.outcome, "tripwire");
    assert_eq!(record.tripwire.as_ref().unwrap().processor_id, "guard");
    assert_eq!(
        hooks(&record),
        ["message-history:processInput:continue", "probe:processInput:continue", "guard:processInput:abort"],
        "memory's processors first, as the pipeline runs them"
    );
    let abort = hook_entry(&record, "guard");
    assert_eq!(abort.reason, "aborted in processInput");
    assert_eq!(common::json(&abort.metadata), serde_json::json!({ "hook": "processInput" }));
    assert!(model_entries(&record).is_empty());
}

/// A processor's failure, a model's rejection, a tool call and a run over `max_run_ms` are each
/// recorded as what they were.
#[tokio::test]
async fn failures_tools_and_timeouts_are_recorded() {
    let server = TestServer::start(CONFIG).await;
    let broken = record(&server, &server.generate(request("broken", "hi")).await.run_id).await;
    assert_eq!(broken.outcome, "error");
    let failed = hook_entry(&broken, "broken");
    assert_eq!((failed.hook.as_str(), failed.decision.as_str()), ("processOutputResult", "failed"));
    assert!(failed.reason.contains("returned malformed data"), "{}", failed.reason);

    let rejected = record(&server, &server.generate(request("rejected", "hi")).await.run_id).await;
    assert_eq!(rejected.outcome, "error");
    assert!(model_entries(&rejected)[0].error.contains("bad request"), "{:?}", model_entries(&rejected));

    let tools = record(&server, &server.generate(request("tools", "add")).await.run_id).await;
    assert_eq!(tools.outcome, "finished");
    let tool = tools
        .timeline
        .iter()
        .find_map(|entry| match &entry.entry {
            Some(Entry::Tool(call)) => Some(call),
            _ => None,
        })
        .expect("the tool call");
    assert_eq!((tool.name.as_str(), tool.step, tool.error.as_str()), ("calculator", 0, ""));
    assert_eq!(model_entries(&tools).len(), 2, "one model call per step");

    let slow = record(&server, &server.generate(request("slow", "go")).await.run_id).await;
    assert_eq!(slow.outcome, "timed-out");
    assert!(slow.error.unwrap().message.contains("max_run_ms"));
}

/// A run whose client goes away is recorded as cancelled.
#[tokio::test]
async fn a_cancelled_run_is_recorded() {
    let server = TestServer::start(CONFIG).await;
    let mut stream = server.client().await.stream(request("slow", "go")).await.unwrap().into_inner();
    let first = stream.message().await.unwrap().expect("the run started");
    drop(stream);
    let record = record(&server, &first.run_id).await;
    assert_eq!(record.outcome, "cancelled");
}

/// A remote processor skipped under the open policy, one that timed out under the closed one,
/// and the instance that answered are each in the timeline.
#[tokio::test]
async fn remote_skips_timeouts_and_instances_are_recorded() {
    let server = TestServer::start(CONFIG).await;
    let _guard =
        serve(server.channel().await, "word-guard", &[pb::Hook::ProcessInput], Arc::new(|_| cont())).await;
    let _mute = serve(server.channel().await, "mute", &[pb::Hook::ProcessInput], Arc::new(|_| None)).await;

    let remote = record(&server, &server.generate(request("remote", "hi")).await.run_id).await;
    assert_eq!(remote.outcome, "finished");
    let skipped = hook_entry(&remote, "late");
    assert_eq!((skipped.decision.as_str(), skipped.reason.as_str()), ("skipped", "unavailable"));
    let answered = hook_entry(&remote, "word-guard");
    assert_eq!((answered.decision.as_str(), answered.instance_id.as_str()), ("continue", "word-guard-test"));

    let muted = record(&server, &server.generate(request("muted", "hi")).await.run_id).await;
    assert_eq!(muted.outcome, "tripwire");
    let timed_out = hook_entry(&muted, "mute");
    assert_eq!(timed_out.decision, "abort");
    assert!(timed_out.reason.contains("timed out after 200 ms"), "{}", timed_out.reason);
    let waited = muted.timeline.iter().find(|entry| matches!(&entry.entry, Some(Entry::Hook(_)))).unwrap();
    assert!(waited.duration_us >= 200_000, "it waited its timeout: {waited:?}");
}

/// A remote processor takes part only at the hooks its connected instances implement: a run
/// through an instance serving processInput records that call and no other of its hooks, while
/// a processor with no instance connected is still tried at every hook (its policy decides).
#[tokio::test]
async fn a_remote_processor_is_called_only_at_the_hooks_its_instances_serve() {
    let server = TestServer::start(CONFIG).await;
    let _guard =
        serve(server.channel().await, "word-guard", &[pb::Hook::ProcessInput], Arc::new(|_| cont())).await;
    let record = record(&server, &server.generate(request("remote", "hi")).await.run_id).await;
    assert_eq!(record.outcome, "finished");
    let of = |processor: &str| -> Vec<String> {
        let prefix = format!("{processor}:");
        hooks(&record).into_iter().filter(|entry| entry.starts_with(&prefix)).collect()
    };
    assert_eq!(of("word-guard"), ["word-guard:processInput:continue"]);
    let late = of("late");
    for hook in ["processInput:", "processInputStep@0:", "processLLMRequest@0:", "processLLMResponse@0:"] {
        assert!(late.iter().any(|entry| entry.starts_with(&format!("late:{hook}"))), "{hook} in {late:?}");
    }
}

/// `ListRuns` filters by agent, outcome and processor, pages newest first, and names a bad
/// field in its refusal.
#[tokio::test]
async fn runs_are_filtered_and_paged() {
    let server = TestServer::start(CONFIG).await;
    let mut ids = Vec::new();
    for text in ["one", "two", "three"] {
        ids.push(server.generate(request("echo", text)).await.run_id);
    }
    let tripped = server.generate(request("guarded", "four")).await.run_id;
    record(&server, &tripped).await;
    let mut client = runs(&server).await;
    let list = |request: pb::ListRunsRequest| {
        let mut client = client.clone();
        async move { client.list_runs(request).await.map(|page| page.into_inner()) }
    };
    let run_ids =
        |page: &pb::ListRunsResponse| page.runs.iter().map(|run| run.run_id.clone()).collect::<Vec<_>>();

    let all = list(pb::ListRunsRequest::default()).await.unwrap();
    assert_eq!(
        run_ids(&all),
        [tripped.clone(), ids[2].clone(), ids[1].clone(), ids[0].clone()],
        "newest first"
    );
    let by_outcome =
        list(pb::ListRunsRequest { outcome: "tripwire".into(), ..Default::default() }).await.unwrap();
    assert_eq!(run_ids(&by_outcome), [tripped.as_str()]);
    let by_agent = list(pb::ListRunsRequest { agent_id: "echo".into(), ..Default::default() }).await.unwrap();
    assert_eq!(by_agent.runs.len(), 3);
    let by_processor =
        list(pb::ListRunsRequest { processor_id: "guard".into(), ..Default::default() }).await.unwrap();
    assert_eq!(run_ids(&by_processor), [tripped.as_str()]);

    let first = list(pb::ListRunsRequest { page_size: 3, ..Default::default() }).await.unwrap();
    assert_eq!(first.runs.len(), 3);
    assert!(!first.next_page_token.is_empty());
    let rest =
        list(pb::ListRunsRequest { page_size: 3, page_token: first.next_page_token, ..Default::default() })
            .await
            .unwrap();
    assert_eq!(run_ids(&rest), [ids[0].clone()]);
    assert!(rest.next_page_token.is_empty());

    let bad = client.list_runs(pb::ListRunsRequest { outcome: "won".into(), ..Default::default() }).await;
    let bad = bad.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("outcome"), "{}", bad.message());
    let unknown = client.get_run(pb::GetRunRequest { run_id: "no-such-run".into() }).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
}

/// A processor that rewrites says what it replaced, one that drops chunks says so; a stream
/// processor's calls with one decision in a step are one entry, however many chunks it saw.
#[tokio::test]
async fn replacements_and_drops_are_recorded() {
    let server = TestServer::start(CONFIG).await;
    let text = "ＦＵＬＬ width, code 1234 and many words to count past the limit";
    let run_id = server.generate(request("rewriting", text)).await.run_id;
    let record = record(&server, &run_id).await;
    let calls: Vec<&pb::HookCallEntry> = record
        .timeline
        .iter()
        .filter_map(|entry| match &entry.entry {
            Some(Entry::Hook(call)) => Some(call),
            _ => None,
        })
        .collect();
    let input = calls.iter().find(|call| call.processor_id == "nfkc").expect("the normalizer's call");
    assert_eq!((input.decision.as_str(), input.reason.as_str()), ("replaced", "messages"));
    let redacting: Vec<_> = calls.iter().filter(|call| call.processor_id == "digits").collect();
    assert!(
        redacting.iter().any(|call| call.decision == "replaced" && call.reason == "chunk"),
        "{redacting:?}"
    );
    let passed = redacting.iter().find(|call| call.decision == "continue").expect("chunks passed unchanged");
    assert!(passed.calls > 1, "merged: {redacting:?}");
    let short: Vec<_> = calls.iter().filter(|call| call.processor_id == "short").collect();
    let dropped = short.iter().find(|call| call.decision == "dropped").expect("the limiter dropped chunks");
    assert!(dropped.calls > 1, "one entry for the dropped chunks: {short:?}");
}

/// A key that is not an admin key lists only the runs of a resource it may use, with its own
/// name on them, and is told another resource's run does not exist; an admin key sees all.
#[tokio::test]
async fn keys_see_only_their_resources_runs() {
    let config = format!(
        "{CONFIG}\n[[auth.keys]]\nname = \"ops\"\nkey = \"ops-key\"\nresources = [\"*\"]\nadmin = true\n\n\
         [[auth.keys]]\nname = \"alice\"\nkey = \"alice-key\"\nresources = [\"alice\"]\n"
    );
    let server = TestServer::start(&config).await;
    let agents = server.client().await;
    let run = |key: &'static str, resource: &str| {
        let message = pb::RunRequest {
            agent_id: "echo".into(),
            text: "hi".into(),
            thread_id: "t".into(),
            resource_id: resource.into(),
            ..Default::default()
        };
        let mut agents = agents.clone();
        async move { agents.generate(with_key(key, message)).await.unwrap().into_inner().run_id }
    };
    let alices = run("alice-key", "alice").await;
    let bobs = run("ops-key", "bob").await;
    let admin_view = {
        let mut client = runs(&server).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let page = client
                .list_runs(with_key("ops-key", pb::ListRunsRequest::default()))
                .await
                .unwrap()
                .into_inner();
            if page.runs.len() == 2 || Instant::now() > deadline {
                break page;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    assert_eq!(admin_view.runs.len(), 2, "the admin key sees every run");

    let mut client = runs(&server).await;
    let refused = client.list_runs(with_key("alice-key", pb::ListRunsRequest::default())).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("resource_id"), "{}", refused.message());
    let others = pb::ListRunsRequest { resource_id: "bob".into(), ..Default::default() };
    assert_eq!(
        client.list_runs(with_key("alice-key", others)).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let own = pb::ListRunsRequest { resource_id: "alice".into(), ..Default::default() };
    let own = client.list_runs(with_key("alice-key", own)).await.unwrap().into_inner();
    assert_eq!(
        own.runs.iter().map(|run| (run.run_id.as_str(), run.key_name.as_str())).collect::<Vec<_>>(),
        [(alices.as_str(), "alice")]
    );
    let hidden = client.get_run(with_key("alice-key", pb::GetRunRequest { run_id: bobs })).await.unwrap_err();
    assert_eq!(hidden.code(), Code::NotFound);
    let everything =
        client.watch_runs(with_key("alice-key", pb::WatchRunsRequest::default())).await.unwrap_err();
    assert_eq!(everything.code(), Code::InvalidArgument, "watching needs the resource too");
}

/// A key limited to some agents lists, watches and counts only those agents' runs of its
/// resource — never another agent's record, with its prompt — and may not name another agent.
#[tokio::test]
async fn keys_see_only_their_agents_runs() {
    let config = format!(
        "{CONFIG}\n[[auth.keys]]\nname = \"ops\"\nkey = \"ops-key\"\nresources = [\"*\"]\nadmin = true\n\n\
         [[auth.keys]]\nname = \"echoer\"\nkey = \"echo-key\"\nresources = [\"alice\"]\nagents = [\"ec*\"]\n"
    );
    let server = TestServer::start(&config).await;
    let mut client = runs(&server).await;
    let alice = || pb::WatchRunsRequest { resource_id: "alice".into(), ..Default::default() };
    let mut watch = client.watch_runs(with_key("echo-key", alice())).await.unwrap().into_inner();
    let agents = server.client().await;
    let run = |key: &'static str, agent: &str| {
        let message = pb::RunRequest {
            agent_id: agent.into(),
            text: "hi".into(),
            thread_id: "t".into(),
            resource_id: "alice".into(),
            ..Default::default()
        };
        let mut agents = agents.clone();
        async move { agents.generate(with_key(key, message)).await.unwrap().into_inner().run_id }
    };
    run("ops-key", "kept").await;
    let echoed = run("echo-key", "echo").await;

    let list = |agent: &str| pb::ListRunsRequest {
        resource_id: "alice".into(),
        agent_id: agent.into(),
        ..Default::default()
    };
    common::eventually_some("the admin key sees both runs", || {
        let mut client = client.clone();
        async move {
            let page = client.list_runs(with_key("ops-key", list(""))).await.unwrap().into_inner();
            (page.runs.len() == 2).then_some(())
        }
    })
    .await;
    let own = client.list_runs(with_key("echo-key", list(""))).await.unwrap().into_inner();
    assert_eq!(own.runs.iter().map(|run| run.run_id.as_str()).collect::<Vec<_>>(), [echoed.as_str()]);
    let other = client.list_runs(with_key("echo-key", list("kept"))).await.unwrap_err();
    assert_eq!(other.code(), Code::PermissionDenied, "{other:?}");
    assert!(other.message().contains("agent `kept`"), "{}", other.message());
    let stats = pb::GetStatsRequest { resource_id: "alice".into(), ..Default::default() };
    assert_eq!(client.get_stats(with_key("echo-key", stats)).await.unwrap().into_inner().runs, 1);

    // The feed showed the echo run begin and end, and nothing of the other agent's.
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(10), watch.message()).await;
        match event.expect("the echo run's events").unwrap().and_then(|event| event.event) {
            Some(pb::run_event::Event::Started(run) | pb::run_event::Event::Ended(run)) => {
                seen.push(run.agent_id)
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(seen, ["echo", "echo"], "the feed never shows another agent's run");
}

/// A record's content shows the prompts' system messages (the agent's instructions) only to a
/// key that may read the agent's instructions, as `GetAgent` does: not on an open server, not to
/// a key without `instructions`, in `GetRun` and in `WatchRuns` alike.
#[tokio::test]
async fn record_content_shows_instructions_only_to_keys_that_read_them() {
    let system = |record: &pb::RunRecord| {
        let content = record.content.as_ref().expect("content is kept");
        let roles: Vec<&str> =
            content.prompts[0].messages.iter().map(|message| message.role.as_str()).collect();
        (roles.contains(&"system"), content.system_withheld)
    };
    let open = TestServer::start(CONFIG).await;
    let run_id = open.generate(request("kept", "hello")).await.run_id;
    assert_eq!(system(&record(&open, &run_id).await), (false, true), "an open server hides them");

    let config = format!(
        "{CONFIG}\n[[auth.keys]]\nname = \"reader\"\nkey = \"reader-key\"\nresources = [\"*\"]\n\
         instructions = [\"kept\"]\n\n\
         [[auth.keys]]\nname = \"user\"\nkey = \"user-key\"\nresources = [\"alice\"]\n"
    );
    let server = TestServer::start(&config).await;
    let mut client = runs(&server).await;
    let watching = pb::WatchRunsRequest { resource_id: "alice".into(), ..Default::default() };
    let mut watch = client.watch_runs(with_key("user-key", watching)).await.unwrap().into_inner();
    let message = pb::RunRequest {
        agent_id: "kept".into(),
        text: "hello".into(),
        thread_id: "t".into(),
        resource_id: "alice".into(),
        ..Default::default()
    };
    let mut agents = server.client().await;
    let run_id = agents.generate(with_key("user-key", message)).await.unwrap().into_inner().run_id;
    let get = |key: &'static str| {
        let mut client = client.clone();
        let run_id = run_id.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match client.get_run(with_key(key, pb::GetRunRequest { run_id: run_id.clone() })).await {
                    Ok(record) => return record.into_inner(),
                    Err(status) if status.code() == Code::NotFound && Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err(status) => panic!("GetRun {run_id}: {status}"),
                }
            }
        }
    };
    let read = get("reader-key").await;
    assert_eq!(system(&read), (true, false), "a key with `instructions` reads them");
    assert_eq!(common::message_text(&read.content.unwrap().prompts[0].messages[0]), "Be brief.");
    assert_eq!(system(&get("user-key").await), (false, true), "a key without does not");
    let ended = loop {
        let event = tokio::time::timeout(Duration::from_secs(10), watch.message()).await;
        if let Some(pb::run_event::Event::Ended(run)) =
            event.expect("the run's end").unwrap().and_then(|event| event.event)
        {
            break run;
        }
    };
    assert_eq!(system(&ended), (false, true), "nor does the feed show them");
}

/// `[records] max_runs` keeps the newest records only, and `DeleteResource` deletes a resource's
/// records with its memory.
#[tokio::test]
async fn retention_and_delete_resource_remove_records() {
    let server = TestServer::start(&format!("{CONFIG}\n[records]\nmax_runs = 3\n")).await;
    let mut last = String::new();
    for index in 0..6 {
        last = server.generate(in_thread("echo", &format!("run {index}"), &format!("t{index}"))).await.run_id;
        record(&server, &last).await;
    }
    let mut client = runs(&server).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let kept = loop {
        let page = client.list_runs(pb::ListRunsRequest::default()).await.unwrap().into_inner();
        if page.runs.len() <= 3 || Instant::now() > deadline {
            break page;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(kept.runs.len(), 3, "the newest three are kept");
    assert_eq!(kept.runs[0].run_id, last);

    let mut memory = pb::memory_service_client::MemoryServiceClient::new(server.channel().await);
    memory.delete_resource(pb::DeleteResourceRequest { resource_id: "alice".into() }).await.unwrap();
    let left = client.list_runs(pb::ListRunsRequest::default()).await.unwrap().into_inner();
    assert!(left.runs.is_empty(), "{:?}", left.runs);
}

/// `WatchRuns` streams runs as they begin and end: a blocked run appears when it starts and
/// again when it ends, with its tripwire and timeline; a run its filter leaves out never shows.
#[tokio::test]
async fn watch_runs_streams_runs_as_they_begin_and_end() {
    let server = TestServer::start(CONFIG).await;
    let watching = pb::WatchRunsRequest { agent_id: "guarded".into(), ..Default::default() };
    let mut watch = runs(&server).await.watch_runs(watching).await.unwrap().into_inner();
    server.generate(request("echo", "not watched")).await;
    let blocked = server.generate(in_thread("guarded", "hi", "tw")).await.run_id;
    let next = |event: Option<pb::RunEvent>| event.and_then(|event| event.event);
    match next(watch.message().await.unwrap()) {
        Some(pb::run_event::Event::Started(run)) => {
            assert_eq!(
                (run.run_id.as_str(), run.agent_id.as_str(), run.outcome.as_str()),
                (blocked.as_str(), "guarded", "")
            );
            assert!(run.started_at > 0);
        }
        other => panic!("expected the start of {blocked}: {other:?}"),
    }
    match next(watch.message().await.unwrap()) {
        Some(pb::run_event::Event::Ended(run)) => {
            assert_eq!((run.run_id.as_str(), run.outcome.as_str()), (blocked.as_str(), "tripwire"));
            assert_eq!(run.tripwire.as_ref().unwrap().processor_id, "guard");
            assert!(hooks(&run).contains(&"guard:processInput:abort".to_owned()), "{:?}", hooks(&run));
        }
        other => panic!("expected the end of {blocked}: {other:?}"),
    }
}

/// `GetStats` counts runs by outcome, tripwires by processor and reason, and gives each
/// processor's hook its calls and latency percentiles.
#[tokio::test]
async fn stats_count_outcomes_tripwires_and_hook_latency() {
    let server = TestServer::start(CONFIG).await;
    let mut last = String::new();
    for text in ["one", "two"] {
        server.generate(request("echo", text)).await;
    }
    for text in ["three", "four", "five"] {
        last = server.generate(request("guarded", text)).await.run_id;
    }
    record(&server, &last).await;
    let mut client = runs(&server).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let stats = loop {
        let stats = client.get_stats(pb::GetStatsRequest::default()).await.unwrap().into_inner();
        if stats.runs == 5 || Instant::now() > deadline {
            break stats;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(stats.runs, 5);
    assert!(stats.complete);
    assert_eq!((stats.outcomes["finished"], stats.outcomes["tripwire"]), (2, 3));
    assert_eq!(stats.tripwires.len(), 1);
    let tripwire = &stats.tripwires[0];
    assert_eq!(
        (tripwire.processor_id.as_str(), tripwire.reason.as_str(), tripwire.count),
        ("guard", "aborted in processInput", 3)
    );
    let guard = stats.hooks.iter().find(|hook| hook.processor_id == "guard").expect("the guard's hook");
    assert_eq!((guard.hook.as_str(), guard.calls, guard.aborts), ("processInput", 3, 3));
    let probe =
        stats.hooks.iter().find(|hook| hook.processor_id == "probe" && hook.hook == "processInput").unwrap();
    assert_eq!(probe.calls, 5, "the probe's processInput ran in all five runs");
    assert!(
        probe.p50_us <= probe.p95_us && probe.p95_us <= probe.p99_us && probe.p99_us <= probe.max_us,
        "{probe:?}"
    );
    let echo_only =
        client.get_stats(pb::GetStatsRequest { agent_id: "echo".into(), ..Default::default() }).await;
    assert_eq!(echo_only.unwrap().into_inner().runs, 2);
}

/// The warnings of one record.
fn warnings(record: &pb::RunRecord) -> Vec<&pb::WarningEntry> {
    record
        .timeline
        .iter()
        .filter_map(|entry| match &entry.entry {
            Some(Entry::Warning(warning)) => Some(warning),
            _ => None,
        })
        .collect()
}

/// A `warn` strategy's finding and a remote processor's warnings are in the run's timeline with
/// the processor, hook, step, kind and message (a stream processor's warnings of one kind in a
/// step counted in one entry), still stream as `data-` chunks, and are counted by `GetStats`; a
/// malformed remote warning fails the call, naming the field.
#[tokio::test]
async fn warnings_are_recorded_streamed_and_counted() {
    let server = TestServer::start(CONFIG).await;
    let answer: common::remote::Answer = Arc::new(|call| {
        let text = common::remote::call_text(call);
        let kind = if text.contains("BAD KIND") { "Not A Kind" } else { "tone" };
        let warning = pb::Warning {
            kind: kind.into(),
            message: "the tone is curt".into(),
            details: Some(agentwire::server::value::to_proto(&serde_json::json!({ "score": 0.7 }))),
        };
        let mut result = cont()?;
        result.warnings.push(warning);
        Some(result)
    });
    let _warner = serve(server.channel().await, "warner", &[pb::Hook::ProcessInput], answer).await;

    let text = "mail ann@example.com and bob@example.com, then ann@example.com again";
    let answer = server.generate(request("warned", text)).await;
    let chunks: Vec<&str> = answer.data.iter().map(|chunk| chunk.r#type.as_str()).collect();
    assert!(chunks.contains(&"data-pii") && chunks.contains(&"data-tone"), "{chunks:?}");
    let record = record(&server, &answer.run_id).await;
    assert_eq!(record.outcome, "finished");
    let warned = warnings(&record);
    let input = warned.iter().find(|warning| warning.hook == "processInput" && warning.kind == "pii");
    let input = input.expect("the input's PII warning");
    assert_eq!((input.processor_id.as_str(), input.step, input.count), ("pii-warn", None, 1));
    assert!(input.message.contains("email"), "{input:?}");
    let remote = warned.iter().find(|warning| warning.kind == "tone").expect("the remote warning");
    assert_eq!((remote.processor_id.as_str(), remote.message.as_str()), ("warner", "the tone is curt"));
    let details = remote.details.clone().map(agentwire::server::value::from_proto).unwrap();
    assert_eq!(details["score"], 0.7);
    let stream: Vec<_> = warned.iter().filter(|warning| warning.hook == "processOutputStream").collect();
    assert_eq!(stream.len(), 1, "one entry for the step's PII warnings: {warned:?}");
    assert_eq!(stream[0].step, Some(0));
    assert!(stream[0].count >= 1, "{stream:?}");

    let mut client = runs(&server).await;
    let stats = client.get_stats(pb::GetStatsRequest::default()).await.unwrap().into_inner();
    let count = |processor: &str, kind: &str| {
        stats
            .warnings
            .iter()
            .find(|warning| warning.processor_id == processor && warning.kind == kind)
            .map(|w| w.count)
    };
    assert_eq!(count("warner", "tone"), Some(1));
    assert_eq!(count("pii-warn", "pii"), Some(1 + u64::from(stream[0].count)));

    let refused = server.generate(request("warned", "BAD KIND")).await;
    let error = refused.error.expect("a malformed warning fails the call");
    assert!(error.message.contains("warnings[0].kind"), "{error:?}");
}

/// An agent with `[agents.record] content = true` keeps the prompt its model saw and the chunks
/// its client got (text deltas of one text joined) in `GetRun`, never in `ListRuns`; any other
/// agent's record holds no text at all.
#[tokio::test]
async fn content_is_kept_only_for_agents_that_ask() {
    let server = TestServer::start(CONFIG).await;
    let chunks = server.stream(request("kept", "hello kept words")).await;
    let run_id = chunks[0].run_id.clone();
    let record = record(&server, &run_id).await;
    let content = record.content.expect("the agent keeps content");
    assert!(!content.truncated);
    assert_eq!(content.prompts.len(), 1);
    let prompt: Vec<(String, String)> = content.prompts[0]
        .messages
        .iter()
        .map(|message| (message.role.clone(), common::message_text(message)))
        .collect();
    assert_eq!(prompt, [("user".to_owned(), "hello kept words".to_owned())], "instructions withheld");
    let types: Vec<&str> = content.chunks.iter().map(|chunk| chunk.r#type.as_str()).collect();
    assert_eq!(types.first(), Some(&"start"));
    assert_eq!(types.last(), Some(&"finish"));
    let texts: Vec<&str> = content
        .chunks
        .iter()
        .filter_map(|chunk| match &chunk.payload {
            Some(pb::chunk::Payload::TextDelta(delta)) => Some(delta.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["echo: hello kept words"], "the deltas of one text are one chunk");
    assert!(chunks.iter().filter(|chunk| chunk.r#type == "text-delta").count() > 1, "the client got several");

    let mut client = runs(&server).await;
    let listed = client.list_runs(pb::ListRunsRequest { agent_id: "kept".into(), ..Default::default() });
    let listed = listed.await.unwrap().into_inner();
    assert!(listed.runs[0].content.is_none(), "lists leave content out");
    let plain = record_of(&server, "echo").await;
    assert!(plain.content.is_none(), "an agent that does not ask keeps no text");
}

/// The record of a fresh run of `agent`.
async fn record_of(server: &TestServer, agent: &str) -> pb::RunRecord {
    let run_id = server.generate(request(agent, "plain")).await.run_id;
    record(server, &run_id).await
}

/// A tripwire in each of the nine hooks is recorded as such: the run's outcome, the processor
/// and reason of its tripwire, and an `abort` entry of that hook (with its step where it has
/// one) as the last hook call of that processor (a stream processor passes chunks before).
#[tokio::test]
async fn a_tripwire_in_each_hook_is_recorded_in_that_hook() {
    use agentwire::domain::Hook;
    let mut config = String::new();
    for hook in Hook::ALL {
        let name = hook.name();
        let list = match agentwire::runtime::Stage::of(hook).name() {
            "input" => "input_processors",
            "output" => "output_processors",
            _ => "error_processors",
        };
        let script = match hook {
            Hook::ProcessToolResult => {
                r#"[{ tool_calls = [{ name = "calculator", args = { expression = "1 + 1" } }] }, { text = "two" }]"#
            }
            Hook::ProcessApiError => r#"[{ error = { status = 500, message = "down" } }, { text = "up" }]"#,
            _ => r#"[{ text = "fine" }]"#,
        };
        config.push_str(&format!(
            "[processors.trap-{name}]\nkind = \"abort-in\"\nhook = \"{name}\"\n\n[[agents]]\nid = \"trip-{name}\"\n\
             model = \"mock/script\"\ntools = [\"calculator\"]\n{list} = [\"trap-{name}\"]\nscript = {script}\n\n"
        ));
    }
    let server = TestServer::start(&config).await;
    for hook in Hook::ALL {
        let name = hook.name();
        let run_id = server.generate(request(&format!("trip-{name}"), "hi")).await.run_id;
        let record = record(&server, &run_id).await;
        assert_eq!(record.outcome, "tripwire", "{name}: {record:?}");
        let tripwire = record.tripwire.as_ref().unwrap();
        assert_eq!(
            (tripwire.processor_id.clone(), tripwire.reason.clone()),
            (format!("trap-{name}"), format!("aborted in {name}"))
        );
        let trap = format!("trap-{name}");
        let calls: Vec<&pb::HookCallEntry> = record
            .timeline
            .iter()
            .filter_map(|entry| match &entry.entry {
                Some(Entry::Hook(call)) if call.processor_id == trap => Some(call),
                _ => None,
            })
            .collect();
        let abort = *calls.last().unwrap_or_else(|| panic!("{name}: no call of the trap"));
        assert_eq!((abort.hook.as_str(), abort.decision.as_str()), (name, "abort"), "{name}: {calls:?}");
        let stepped = !matches!(hook, Hook::ProcessInput | Hook::ProcessOutputResult);
        assert_eq!(abort.step.is_some(), stepped, "{name}: {abort:?}");
    }
}
