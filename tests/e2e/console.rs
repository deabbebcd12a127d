//! The console through the real server: its pages and assets are served with a strict content
//! policy, and its API is the gRPC API in JSON — same methods, same keys and scopes, errors with
//! the gRPC code's name and the field at fault. Also the figures the console draws from:
//! `GetStats` buckets and each agent's pipeline.

use crate::common;

use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::server::pb::run_service_client::RunServiceClient;
use common::{TestServer, eventually_some, request};
use serde_json::{Value, json};
use tonic::{Code, Request};

const CONFIG: &str = r#"
[console]
allow_unauthenticated_writes = true

[processors.no-secrets]
kind = "content-filter"
blocked_words = ["secret"]

[processors.word-guard]
kind = "remote"
timeout_ms = 250
on_failure = "open"

[[agents]]
id = "echo"
model = "mock/echo"

[[agents]]
id = "guarded"
model = "mock/echo"
input_processors = ["no-secrets", "word-guard"]
output_processors = ["no-secrets"]
memory = { last_messages = 4, semantic_recall = { top_k = 2 } }
"#;

const KEYS: &str = r#"
[[auth.keys]]
name = "ops"
key = "ops-key"
resources = ["*"]
admin = true

[[auth.keys]]
name = "alice"
key = "alice-key"
resources = ["alice"]
"#;

/// Calls the console's API; returns the HTTP status and the body.
async fn api(server: &TestServer, method: &str, key: Option<&str>, body: &str) -> (u16, String) {
    let mut call = reqwest::Client::new()
        .post(format!("http://{}/api/agentwire.v1.{method}", server.console_addr))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(key) = key {
        call = call.bearer_auth(key);
    }
    let response = call.send().await.expect("the console answers");
    (response.status().as_u16(), response.text().await.expect("a body"))
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|error| panic!("not JSON ({error}): {body}"))
}

/// The page and its scripts come from the binary, with a policy that allows nothing from
/// elsewhere; an unknown asset or page is 404.
#[tokio::test]
async fn pages_and_assets_are_served_from_the_binary() {
    let server = TestServer::start(CONFIG).await;
    let get = |path: &'static str| {
        let url = format!("http://{}{path}", server.console_addr);
        async move { reqwest::get(url).await.expect("the console answers") }
    };
    let index = get("/").await;
    assert_eq!(index.status(), 200);
    let policy = index.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(policy.starts_with("default-src 'self'"), "{policy}");
    assert_eq!(index.headers()["x-frame-options"], "DENY");
    assert!(index.text().await.unwrap().contains("/assets/app.js"));
    let script = get("/assets/app.js").await;
    assert_eq!(script.status(), 200);
    assert!(script.headers()["content-type"].to_str().unwrap().starts_with("text/javascript"));
    assert_eq!(get("/assets/nope.js").await.status(), 404);
    assert_eq!(get("/elsewhere").await.status(), 404);
}

/// A unary method answers with its response in JSON, a streaming one with a line per message.
#[tokio::test]
async fn the_api_is_the_grpc_api_in_json() {
    let server = TestServer::start(CONFIG).await;
    let (status, body) =
        api(&server, "AgentService/Stream", None, r#"{"agent_id": "echo", "text": "hi there"}"#).await;
    assert_eq!(status, 200, "{body}");
    let chunks: Vec<Value> = body.lines().map(json_of).collect();
    let types: Vec<&str> = chunks.iter().map(|chunk| chunk["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"start"));
    assert_eq!(types.last(), Some(&"finish"));
    assert!(types.contains(&"text-delta"), "{types:?}");
    let run_id = chunks[0]["run_id"].as_str().unwrap().to_owned();
    let asked = json!({ "run_id": run_id }).to_string();
    let record = eventually_some("the run's record", || async {
        let (status, body) = api(&server, "RunService/GetRun", None, &asked).await;
        (status == 200).then(|| json_of(&body))
    })
    .await;
    assert_eq!(record["outcome"], "finished");
    assert_eq!(record["agent_id"], "echo");
    assert!(
        record["timeline"].as_array().unwrap().iter().any(|entry| entry["model"]["model"] == "mock/echo")
    );
    // Every field is present, 64-bit integers are numbers.
    assert!(record["started_at"].is_i64(), "{record}");
    assert_eq!(record["thread_id"], "");
}

/// Bad calls get the gRPC code's name and a message naming what is wrong.
#[tokio::test]
async fn bad_calls_name_the_problem() {
    let server = TestServer::start(CONFIG).await;
    let error = |body: &str| json_of(body)["error"].clone();
    let (status, body) = api(&server, "RunService/ListRuns", None, r#"{"outcome": "exploded"}"#).await;
    assert_eq!((status, error(&body)["code"].as_str()), (400, Some("INVALID_ARGUMENT")));
    assert!(error(&body)["message"].as_str().unwrap().contains("outcome"), "{body}");
    let (status, body) = api(&server, "RunService/ListRuns", None, r#"{"page_sise": 3}"#).await;
    assert_eq!(status, 400);
    assert!(body.contains("page_sise"), "{body}");
    let (status, body) = api(&server, "RunService/ListRuns", None, "{not json").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) =
        api(&server, "AgentService/Generate", None, r#"{"agent_id": "nobody", "text": "x"}"#).await;
    assert_eq!((status, error(&body)["code"].as_str()), (404, Some("NOT_FOUND")));
    let (status, body) = api(&server, "RunService/Explode", None, "{}").await;
    assert_eq!((status, error(&body)["code"].as_str()), (404, Some("NOT_FOUND")));
    let (status, body) = api(&server, "ProcessorService/Connect", None, "{}").await;
    assert_eq!((status, error(&body)["code"].as_str()), (501, Some("UNIMPLEMENTED")));
    let plain = reqwest::Client::new()
        .post(format!("http://{}/api/agentwire.v1.AgentService/ListAgents", server.console_addr))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 400, "a form post from another site is refused");
    let fetched =
        reqwest::get(format!("http://{}/api/agentwire.v1.AgentService/ListAgents", server.console_addr))
            .await
            .unwrap();
    assert_eq!(fetched.status(), 405);
}

/// A request naming another `Host` — a page whose name was rebound to this address — is refused,
/// page and API alike, while IP addresses, `localhost` and `[console] hosts` are answered; and a
/// console on a server without keys only reads unless it opts in to writes.
#[tokio::test]
async fn the_console_answers_only_its_own_names_and_only_reads_without_keys() {
    let config =
        "[console]\nhosts = [\"console.example\"]\n\n[[agents]]\nid = \"echo\"\nmodel = \"mock/echo\"\n";
    let server = TestServer::start(config).await;
    let call = |host: &str, method: &str, body: &str| {
        let request = reqwest::Client::new()
            .post(format!("http://{}/api/agentwire.v1.{method}", server.console_addr))
            .header("host", host)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send();
        async move {
            let response = request.await.expect("the console answers");
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let port = server.console_addr.port();
    let (status, body) =
        call("attacker.example", "MemoryService/DeleteResource", r#"{"resource_id": "a"}"#).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("attacker.example") && body.contains("[console] hosts"), "{body}");
    let page = reqwest::Client::new()
        .get(format!("http://{}/", server.console_addr))
        .header("host", format!("attacker.example:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 403, "the page too");
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}"), "console.example".to_owned()] {
        let (status, body) = call(&host, "AgentService/ListAgents", "{}").await;
        assert_eq!(status, 200, "{host}: {body}");
    }
    let (status, body) =
        call("localhost", "AgentService/Generate", r#"{"agent_id": "echo", "text": "hi"}"#).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("allow_unauthenticated_writes"), "{body}");
    let (status, body) = call("localhost", "MemoryService/DeleteResource", r#"{"resource_id": "a"}"#).await;
    assert_eq!(status, 403, "{body}");
}

/// The console takes the server's keys and their scopes: none is refused, a tenant key may not
/// see the pool nor another resource's runs, an admin key sees everything.
#[tokio::test]
async fn the_api_has_the_keys_and_scopes_of_grpc() {
    let server = TestServer::start(&format!("{CONFIG}{KEYS}")).await;
    let (status, body) = api(&server, "AgentService/ListAgents", None, "{}").await;
    assert_eq!(status, 401, "{body}");
    let (status, _) = api(&server, "AgentService/ListAgents", Some("wrong"), "{}").await;
    assert_eq!(status, 401);
    let (status, body) = api(&server, "ProcessorService/ListProcessors", Some("alice-key"), "{}").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("admin"), "{body}");
    let (status, _) = api(&server, "ProcessorService/ListProcessors", Some("ops-key"), "{}").await;
    assert_eq!(status, 200);
    let (status, body) =
        api(&server, "RunService/ListRuns", Some("alice-key"), r#"{"resource_id": "bob"}"#).await;
    assert_eq!(status, 403, "{body}");
    let (status, _) =
        api(&server, "RunService/ListRuns", Some("alice-key"), r#"{"resource_id": "alice"}"#).await;
    assert_eq!(status, 200);
}

/// A streaming call that fails before its first message is an HTTP error, like a unary one.
#[tokio::test]
async fn a_stream_refused_up_front_is_an_http_error() {
    let server = TestServer::start(&format!("{CONFIG}{KEYS}")).await;
    let (status, body) =
        api(&server, "RunService/WatchRuns", Some("alice-key"), r#"{"resource_id": "bob"}"#).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(json_of(&body)["error"]["code"], "PERMISSION_DENIED");
}

/// `GetStats` with `bucket_ms` cuts the window's runs into buckets: runs, outcomes, tripwires by
/// processor, and hook latency by processor; a bucket under a second is refused.
#[tokio::test]
async fn stats_come_in_buckets_for_plots() {
    let server = TestServer::start(CONFIG).await;
    server.generate(request("guarded", "a secret")).await;
    server.generate(request("guarded", "nothing to hide")).await;
    let mut runs = RunServiceClient::new(server.channel().await);
    let asked = pb::GetStatsRequest { bucket_ms: 60_000, ..Default::default() };
    let stats = eventually_some("both runs recorded", || {
        let (mut runs, asked) = (runs.clone(), asked.clone());
        async move {
            let stats = runs.get_stats(asked).await.unwrap().into_inner();
            (stats.runs == 2).then_some(stats)
        }
    })
    .await;
    let runs_in_buckets: u64 = stats.buckets.iter().map(|bucket| bucket.runs).sum();
    assert_eq!(runs_in_buckets, 2);
    assert!(stats.buckets.iter().all(|bucket| bucket.start % 60_000 == 0));
    let tripwires: u64 = stats.buckets.iter().filter_map(|bucket| bucket.tripwires.get("no-secrets")).sum();
    assert_eq!(tripwires, 1);
    let latency = stats.buckets.iter().find_map(|bucket| bucket.latency.get("no-secrets")).expect("latency");
    assert!(latency.calls >= 2 && latency.p95_us >= latency.p50_us, "{latency:?}");
    let refused =
        runs.get_stats(pb::GetStatsRequest { bucket_ms: 10, ..Default::default() }).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("bucket_ms"), "{}", refused.message());
    let unbucketed = runs.get_stats(pb::GetStatsRequest::default()).await.unwrap().into_inner();
    assert!(unbucketed.buckets.is_empty());
}

/// An agent's pipeline lists every processor in call order — the memory processors the runtime
/// adds marked automatic — with kinds and hooks; options only for keys that may read them.
#[tokio::test]
async fn agents_describe_their_pipeline() {
    let server = TestServer::start(&format!("{CONFIG}{KEYS}")).await;
    let mut agents = AgentServiceClient::new(server.channel().await);
    let get = |key: &str| {
        let mut asked = Request::new(pb::GetAgentRequest { agent_id: "guarded".into() });
        asked.metadata_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
        asked
    };
    let agent = agents.get_agent(get("ops-key")).await.unwrap().into_inner();
    let order: Vec<(String, String, bool)> = agent
        .pipeline
        .iter()
        .map(|processor| (processor.stage.clone(), processor.id.clone(), processor.automatic))
        .collect();
    let expected = [
        ("input", "message-history", true),
        ("input", "semantic-recall", true),
        ("input", "no-secrets", false),
        ("input", "word-guard", false),
        ("output", "no-secrets", false),
        ("output", "semantic-recall", true),
        ("output", "message-history", true),
    ];
    let expected: Vec<(String, String, bool)> =
        expected.iter().map(|(stage, id, automatic)| ((*stage).into(), (*id).into(), *automatic)).collect();
    assert_eq!(order, expected);
    let guard = agent.pipeline.iter().find(|processor| processor.id == "word-guard").unwrap();
    assert_eq!(guard.kind, "remote");
    let options = guard.options.as_ref().expect("an operator reads the options");
    assert!(options.fields.contains_key("on_failure"), "{options:?}");
    let filter = agent.pipeline.iter().find(|processor| processor.id == "no-secrets").unwrap();
    assert_eq!(filter.kind, "content-filter");
    assert_eq!(filter.hooks, ["processInput"], "the input stage calls only its input hooks");
    let output_filter = agent.pipeline.iter().find(|p| p.id == "no-secrets" && p.stage == "output").unwrap();
    assert_eq!(output_filter.hooks, ["processOutputStream"]);
    let tenant = agents.get_agent(get("alice-key")).await.unwrap().into_inner();
    assert!(tenant.pipeline.iter().all(|processor| processor.options.is_none()));
    assert_eq!(tenant.pipeline.len(), agent.pipeline.len());
}

/// With `[tls]`'s certificate the console speaks HTTPS only: a client that trusts the CA calls
/// the API, a plaintext request gets no answer.
#[tokio::test]
async fn the_console_serves_https_with_the_servers_certificate() {
    let dir = tempfile::tempdir().unwrap();
    common::certificates::certificates(dir.path());
    let config =
        agentwire::config::Config::parse("[[agents]]\nid = \"echo\"\nmodel = \"mock/echo\"\n").unwrap();
    let runtime =
        agentwire::runtime::Runtime::new(&config, agentwire::runtime::Components::builtin()).unwrap();
    let services = agentwire::server::Services::new(std::sync::Arc::new(runtime), Default::default());
    let acceptor =
        agentwire::console::acceptor(&dir.path().join("server.pem"), &dir.path().join("server.key"))
            .expect("the certificate loads");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let console = tokio::spawn(agentwire::console::serve(
        listener,
        services.routes(),
        Some(acceptor),
        agentwire::console::ConsoleAccess::from_config(&config.console, true),
        agentwire::console::ConnectionLimits::from_config(&config.console),
    ));
    let ca = reqwest::Certificate::from_pem(&std::fs::read(dir.path().join("ca.pem")).unwrap()).unwrap();
    let client = reqwest::Client::builder().add_root_certificate(ca).build().unwrap();
    let response = client
        .post(format!("https://localhost:{port}/api/agentwire.v1.AgentService/ListAgents"))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("HTTPS answers");
    assert_eq!(response.status(), 200);
    let agents = json_of(&response.text().await.unwrap());
    assert_eq!(agents["agents"][0]["id"], "echo");
    let plain = reqwest::Client::new()
        .get(format!("http://localhost:{port}/"))
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await;
    assert!(plain.is_err(), "plaintext is not served: {plain:?}");
    let untrusted = reqwest::Client::new().get(format!("https://localhost:{port}/")).send().await;
    assert!(untrusted.is_err(), "an unknown CA is refused: {untrusted:?}");
    console.abort();
}

/// The console holds at most `[console] max_connections`, and closes a connection that sends no
/// whole request header within `header_timeout_ms`: idle connections that fill it are closed, a
/// request waiting behind them is then served, and the gRPC port answers all along.
#[tokio::test]
async fn idle_console_connections_are_closed_and_capped() {
    use tokio::io::AsyncReadExt;
    let config = "[console]\nmax_connections = 4\nheader_timeout_ms = 300\n\n[[agents]]\nid = \"echo\"\nmodel = \"mock/echo\"\n";
    let server = TestServer::start(config).await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(tokio::net::TcpStream::connect(server.console_addr).await.unwrap());
    }
    assert_eq!(server.generate(request("echo", "still here")).await.text, "echo: still here");
    let page = reqwest::Client::new()
        .get(format!("http://{}/", server.console_addr))
        .timeout(std::time::Duration::from_secs(20))
        .send()
        .await
        .expect("served once the idle connections are closed");
    assert_eq!(page.status(), 200);
    for mut connection in idle {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(std::time::Duration::from_secs(20), connection.read(&mut byte)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "the idle connection was closed: {read:?}");
    }
}
