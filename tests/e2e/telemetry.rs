//! Logs and traces through the real binary: a run is one trace from the caller's `traceparent`
//! through its steps, hooks, model and tool calls, exported over OTLP to a collector, and handed
//! to the remote processor and tool in the span they are called in; without export, the caller's
//! context still reaches them; JSON log lines carry the run's span; bad telemetry settings stop
//! start-up naming the setting.

use crate::common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use common::binary::{BINARY, Served};
use common::remote::{Behaviour, abort, call_text, cont, hello_of, serve_with};
use common::{TestServer, eventually, request};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use tonic::transport::Channel;

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

const AGENTS: &str = r#"
[processors.guard]
kind = "remote"
timeout_ms = 5000

[tools.weather]
kind = "remote"
server = "guard"
timeout_ms = 5000

[[agents]]
id = "traced"
model = "mock/script"
tools = ["weather"]
input_processors = ["guard"]
script = [
  { tool_calls = [{ name = "weather", args = { city = "Paris" } }] },
  { text = "sunny" },
]
"#;

/// An OTLP collector that keeps every span it is sent, and the service name they came from.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
    services: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        for resource_spans in request.into_inner().resource_spans {
            let resource = resource_spans.resource.unwrap_or_default();
            if let Some(name) = attribute(&resource.attributes, "service.name") {
                self.services.lock().unwrap().push(name);
            }
            for scope_spans in resource_spans.scope_spans {
                self.spans.lock().unwrap().extend(scope_spans.spans);
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

impl Collector {
    async fn start() -> (Collector, SocketAddr) {
        let collector = Collector::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let service = TraceServiceServer::new(collector.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        (collector, addr)
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}

fn attribute(attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|attribute| attribute.key == key)?.value.as_ref()?.value.as_ref()?;
    Some(match value {
        AnyValue::StringValue(text) => text.clone(),
        AnyValue::IntValue(number) => number.to_string(),
        AnyValue::BoolValue(flag) => flag.to_string(),
        other => format!("{other:?}"),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The parent span id in a `traceparent` (`00-<trace>-<parent>-<flags>`).
fn parent_in(trace_context: &HashMap<String, String>) -> (String, String) {
    let traceparent = trace_context.get("traceparent").expect("a traceparent");
    let fields: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(fields.len(), 4, "{traceparent}");
    (fields[1].to_owned(), fields[2].to_owned())
}

fn traced_request(agent_id: &str, text: &str, traceparent: Option<&str>) -> tonic::Request<pb::RunRequest> {
    let mut request = tonic::Request::new(request(agent_id, text));
    if let Some(traceparent) = traceparent {
        request.metadata_mut().insert("traceparent", traceparent.parse().unwrap());
        request.metadata_mut().insert("tracestate", "vendor=opaque".parse().unwrap());
    }
    request
}

async fn run_to_end(channel: Channel, request: tonic::Request<pb::RunRequest>) -> Vec<pb::Chunk> {
    let mut stream = AgentServiceClient::new(channel).stream(request).await.unwrap().into_inner();
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        chunks.push(chunk);
    }
    chunks
}

/// The trace contexts a remote instance was handed: `hook` calls and `tool` invocations.
type Seen = Arc<Mutex<Vec<(&'static str, HashMap<String, String>)>>>;

/// Connects the `guard` instance: blocks input containing "secret", answers `weather` calls,
/// and records the trace context of each.
async fn connect_guard(channel: Channel) -> (common::remote::Instance, Seen) {
    let seen: Seen = Arc::default();
    let hooks = Arc::clone(&seen);
    let tools = Arc::clone(&seen);
    let mut hello = hello_of("guard", &[pb::Hook::ProcessInput]);
    hello.tools.push(pb::ToolSpec {
        name: "weather".into(),
        description: "Weather".into(),
        parameters: None,
    });
    let behaviour = Behaviour {
        tools: Some(Arc::new(move |invocation: &pb::ToolInvocation| {
            tools.lock().unwrap().push(("tool", invocation.trace_context.clone()));
            Some(pb::ToolOutput {
                result: Some(agentwire::server::value::to_proto(&serde_json::json!("sunny"))),
                ..Default::default()
            })
        })),
        ..Behaviour::default()
    };
    let answer: common::remote::Answer = Arc::new(move |call| {
        hooks.lock().unwrap().push(("hook", call.trace_context.clone()));
        if call_text(call).contains("secret") { abort("no secrets") } else { cont() }
    });
    (serve_with(channel, hello, answer, behaviour).await, seen)
}

fn config_with(telemetry: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentwire.toml");
    std::fs::write(&path, format!("{telemetry}\n{AGENTS}")).unwrap();
    let path = path.to_str().unwrap().to_owned();
    (dir, path)
}

async fn channel_to(addr: &str) -> Channel {
    Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap()
}

/// One run, one trace: the run continues the caller's span; steps, the hook, the model calls
/// and the tool call nest under it; the remote processor and tool are handed their own span's
/// context; a second, untraced run starts a trace of its own and records its tripwire.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_is_one_trace_from_the_caller_to_its_remote_processors() {
    let (collector, collector_addr) = Collector::start().await;
    let (_dir, config) = config_with(&format!(
        "[telemetry]\notlp_endpoint = \"http://{collector_addr}\"\nservice_name = \"agentwire-test\"\n"
    ));
    let mut served = Served::start(&["--config", &config]);
    let channel = channel_to(&served.addr).await;
    let (_guard, seen) = connect_guard(channel.clone()).await;

    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let chunks =
        run_to_end(channel.clone(), traced_request("traced", "weather in Paris?", Some(&traceparent))).await;
    assert_eq!(common::text(&chunks), "sunny");
    let tripped = run_to_end(channel.clone(), traced_request("traced", "my secret", None)).await;
    assert!(common::tripwire(&tripped).is_some());
    assert!(served.terminate().success(), "{}", served.stderr());

    eventually("the spans are exported", || {
        collector.spans().iter().filter(|span| span.name.starts_with("run ")).count() == 2
    })
    .await;
    assert!(collector.services.lock().unwrap().iter().all(|name| name == "agentwire-test"));
    let spans = collector.spans();
    let (traced, untraced): (Vec<&Span>, Vec<&Span>) =
        spans.iter().partition(|span| hex(&span.trace_id) == CALLER_TRACE);
    let named =
        |name: &str| -> Vec<&Span> { traced.iter().copied().filter(|span| span.name == name).collect() };

    let run = named("run traced");
    assert_eq!(run.len(), 1, "{:?}", spans.iter().map(|span| &span.name).collect::<Vec<_>>());
    let run = run[0];
    assert_eq!(hex(&run.parent_span_id), CALLER_SPAN, "the run continues the caller's span");
    assert_eq!(attribute(&run.attributes, "agent_id").as_deref(), Some("traced"));
    assert_eq!(attribute(&run.attributes, "outcome").as_deref(), Some("finished"));
    assert_eq!(attribute(&run.attributes, "trace_id").as_deref(), Some(CALLER_TRACE));
    assert_eq!(run.kind, SpanKind::Server as i32);

    let steps = [named("step 0"), named("step 1")].concat();
    assert_eq!(steps.len(), 2);
    assert!(steps.iter().all(|step| step.parent_span_id == run.span_id), "steps nest in the run");
    let models = named("chat mock/script");
    assert_eq!(models.len(), 2, "one model call per step");
    for model in &models {
        assert!(steps.iter().any(|step| step.span_id == model.parent_span_id), "model calls nest in steps");
        assert!(attribute(&model.attributes, "gen_ai.usage.output_tokens").is_some());
        assert_eq!(model.kind, SpanKind::Client as i32);
    }

    let hook = named("processInput guard");
    assert_eq!(hook.len(), 1);
    assert_eq!(hook[0].parent_span_id, run.span_id, "processInput runs before the steps");
    let tool = named("tool weather");
    assert_eq!(tool.len(), 1);
    assert_eq!(tool[0].parent_span_id, steps[0].span_id);

    let seen = seen.lock().unwrap().clone();
    let (hook_trace, hook_parent) = parent_in(&seen.iter().find(|(kind, _)| *kind == "hook").unwrap().1);
    assert_eq!(hook_trace, CALLER_TRACE, "the processor is handed the caller's trace");
    assert_eq!(hook_parent, hex(&hook[0].span_id), "…as a child of its hook's span");
    let (tool_trace, tool_parent) = parent_in(&seen.iter().find(|(kind, _)| *kind == "tool").unwrap().1);
    assert_eq!((tool_trace.as_str(), tool_parent), (CALLER_TRACE, hex(&tool[0].span_id)));

    let tripped_run =
        untraced.iter().find(|span| span.name == "run traced").expect("the untraced run's span");
    assert!(tripped_run.parent_span_id.is_empty(), "a run without a caller's trace is a root");
    assert_eq!(attribute(&tripped_run.attributes, "outcome").as_deref(), Some("tripwire"));
    let tripped_hook = untraced
        .iter()
        .find(|span| span.name == "processInput guard" && span.trace_id == tripped_run.trace_id)
        .expect("the tripping hook's span");
    assert_eq!(attribute(&tripped_hook.attributes, "outcome").as_deref(), Some("tripwire"));
    assert!(
        !untraced.iter().any(|span| span.name.starts_with("chat ") && span.trace_id == tripped_run.trace_id)
    );
}

/// A failed model call marks its span, and the run's, as errors.
#[tokio::test(flavor = "multi_thread")]
async fn failures_are_error_spans() {
    let (collector, collector_addr) = Collector::start().await;
    let (_dir, config) = config_with(&format!(
        "[telemetry]\notlp_endpoint = \"http://{collector_addr}\"\n\n\
         [[agents]]\nid = \"broken\"\nmodel = \"mock/script\"\nscript = [{{ error = {{ status = 500, message = \"the model is down\" }} }}]\n"
    ));
    let mut served = Served::start(&["--config", &config]);
    let chunks = run_to_end(channel_to(&served.addr).await, traced_request("broken", "hi", None)).await;
    assert!(common::error(&chunks).is_some());
    assert!(served.terminate().success(), "{}", served.stderr());
    eventually("the spans are exported", || collector.spans().iter().any(|span| span.name == "run broken"))
        .await;
    let spans = collector.spans();
    for name in ["run broken", "chat mock/script"] {
        let span = spans.iter().find(|span| span.name == name).unwrap_or_else(|| panic!("no `{name}` span"));
        let status = span.status.clone().unwrap_or_default();
        assert_eq!(status.code, StatusCode::Error as i32, "{name}");
        assert!(status.message.contains("the model is down"), "{name}: {}", status.message);
    }
}

/// Without an exporter, the caller's trace context still reaches remote processors, as it came.
#[tokio::test(flavor = "multi_thread")]
async fn without_export_the_callers_context_is_passed_on() {
    let server = TestServer::start(AGENTS).await;
    let (_guard, seen) = connect_guard(server.channel().await).await;
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    run_to_end(server.channel().await, traced_request("traced", "weather?", Some(&traceparent))).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "one hook call and one tool call: {seen:?}");
    for (_, trace_context) in seen {
        assert_eq!(trace_context.get("traceparent"), Some(&traceparent));
        assert_eq!(trace_context.get("tracestate").map(String::as_str), Some("vendor=opaque"));
    }
}

/// `--log-format json` writes one JSON object per line; a run's lines carry its span.
#[tokio::test(flavor = "multi_thread")]
async fn json_logs_carry_the_runs_span() {
    let mut served = Served::start_with(&["--log-format", "json"], &[("RUST_LOG", "info,agentwire=debug")]);
    let chunks = run_to_end(channel_to(&served.addr).await, traced_request("echo", "hello", None)).await;
    let run_id = chunks[0].run_id.clone();
    assert!(served.terminate().success());
    let stderr = served.stderr();
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}")))
        .collect();
    assert!(lines.iter().all(|line| line["level"].is_string() && line["timestamp"].is_string()));
    let ended = lines.iter().find(|line| line["message"] == "run ended").expect("a `run ended` line");
    assert_eq!(ended["outcome"], "finished");
    let run = &ended["spans"][0];
    assert_eq!(run["name"], "run");
    assert_eq!(run["run_id"], run_id.as_str());
    assert_eq!(run["agent_id"], "echo");
}

/// A telemetry setting out of range stops start-up with a message naming it (the config key, or
/// the standard variable when the endpoint came from there).
#[test]
fn bad_telemetry_settings_stop_start_up() {
    for (setting, named) in [
        ("sample_ratio = 2.0", "sample_ratio"),
        ("otlp_endpoint = \"collector:4317\"", "otlp_endpoint"),
        ("spans = \"everything\"", "spans"),
    ] {
        let (_dir, config) = config_with(&format!("[telemetry]\n{setting}\n"));
        let data_dir = tempfile::tempdir().unwrap();
        let output = std::process::Command::new(BINARY)
            .args(["serve", "--listen", "127.0.0.1:0", "--config", &config, "--data-dir"])
            .arg(data_dir.path())
            .output()
            .unwrap();
        assert!(!output.status.success(), "{setting}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(named), "{setting}: {stderr}");
        assert!(output.stdout.is_empty(), "no ready line");
    }
    let data_dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(BINARY)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL"), "{stderr}");
}

/// Text logs to a pipe or a file carry no terminal colour codes: a log collector reads plain
/// lines.
#[tokio::test(flavor = "multi_thread")]
async fn text_logs_to_a_pipe_have_no_colour_codes() {
    let mut served = Served::start_with(&[], &[("RUST_LOG", "info,agentwire=debug")]);
    run_to_end(channel_to(&served.addr).await, traced_request("echo", "hello", None)).await;
    assert!(served.terminate().success());
    let stderr = served.stderr();
    assert!(stderr.contains("run ended"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "colour codes in: {stderr}");
}
