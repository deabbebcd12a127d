//! `[limits]` and per-key rates through the server: each refusal has its gRPC code and names its
//! limit and the limit's value; a run over its time ends with an error and saves nothing.

use crate::common;

use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use common::raw_codec::RawCodec;
use common::{TestServer, error, in_thread, request};
use tonic::{Code, Request};

const CONFIG: &str = r#"
[limits]
max_request_bytes = 2048
max_concurrent_runs = 1
queue_timeout_ms = 100
max_run_ms = 300

[[agents]]
id = "echo"
model = "mock/echo"

[[agents]]
id = "slow"
model = "mock/script"
memory = { last_messages = 10 }
script = [{ text = "one two three four five six seven eight nine ten", chunk_delay_ms = 100 }]
"#;

/// A request larger than max_request_bytes is refused with RESOURCE_EXHAUSTED naming the limit.
#[tokio::test]
async fn requests_over_max_request_bytes_are_refused() {
    let server = TestServer::start(CONFIG).await;
    let refused = server.client().await.generate(request("echo", &"x".repeat(4000))).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("2048"), "{}", refused.message());
    assert_eq!(server.generate(request("echo", "small")).await.text, "echo: small");
}

/// Runs beyond max_concurrent_runs wait in the queue, then are refused after queue_timeout_ms.
#[tokio::test]
async fn runs_beyond_max_concurrent_runs_wait_then_are_refused() {
    let server = TestServer::start(CONFIG).await;
    let mut first = server.client().await.stream(request("slow", "go")).await.unwrap().into_inner();
    first.message().await.unwrap().expect("the first run started");
    let refused = server.client().await.generate(request("echo", "me too")).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(
        refused.message().contains("max_concurrent_runs (1)")
            && refused.message().contains("queue_timeout_ms (100)"),
        "{}",
        refused.message()
    );
    while first.message().await.unwrap().is_some() {}
    assert_eq!(server.generate(request("echo", "now")).await.text, "echo: now", "the slot came back");
}

/// The default `max_concurrent_runs` lets 600 streams run at once: none waits for a slot
/// (each outlasts the default queue_timeout_ms, so with room for only 256 the rest would be
/// refused), as a gateway holding 512 provider streams needs — from three connections, each
/// within the default share of one caller (256).
#[tokio::test]
async fn six_hundred_streams_run_at_once_by_default() {
    let server = TestServer::start(
        r#"
[[agents]]
id = "slow"
model = "mock/script"
script = [{ text = "one two three four five six seven eight nine ten eleven twelve", chunk_delay_ms = 100 }]
"#,
    )
    .await;
    let clients = [server.client().await, server.client().await, server.client().await];
    let streams = (0..600).map(|index| {
        let mut client = clients[index % 3].clone();
        async move {
            let mut chunks = client.stream(request("slow", "go")).await?.into_inner();
            let mut deltas = 0;
            while let Some(chunk) = chunks.message().await? {
                deltas += usize::from(chunk.r#type == "text-delta");
            }
            Ok::<_, tonic::Status>(deltas)
        }
    });
    for outcome in futures::future::join_all(streams).await {
        assert_eq!(outcome.expect("no stream waits for a slot or is refused"), 12);
    }
}

/// One caller cannot take every slot: a connection at its share
/// (`max_concurrent_runs_per_caller`) is refused at once, naming it, while another connection's
/// run is served; a key's own `max_concurrent_runs` holds the same way; each refusal is counted in
/// `agentwire_runs_refused_total`.
#[tokio::test]
async fn one_caller_cannot_take_every_run_slot() {
    let config = r#"
[limits]
max_concurrent_runs = 4
max_concurrent_runs_per_caller = 2

[[agents]]
id = "echo"
model = "mock/echo"

[[agents]]
id = "slow"
model = "mock/script"
script = [{ text = "one two three four five six seven eight nine ten", chunk_delay_ms = 100 }]
"#;
    let server = TestServer::start(config).await;
    let greedy = server.client().await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = greedy.clone().stream(request("slow", "go")).await.unwrap().into_inner();
        stream.message().await.unwrap().expect("the run started");
        held.push(stream);
    }
    let refused = greedy.clone().generate(request("echo", "one more")).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("already has 2 runs in flight")
            && refused.message().contains("limits.max_concurrent_runs_per_caller"),
        "{}",
        refused.message()
    );
    assert_eq!(server.generate(request("echo", "mine")).await.text, "echo: mine", "another connection runs");
    drop(held);
    common::eventually_some("the greedy connection's share back", || {
        let mut greedy = greedy.clone();
        async move { greedy.generate(request("echo", "again")).await.ok() }
    })
    .await;

    let keyed = format!(
        "{config}\n[[auth.keys]]\nname = \"batch\"\nkey = \"k\"\nresources = [\"*\"]\nmax_concurrent_runs = 1\n"
    );
    let server = TestServer::start(&keyed).await;
    let with_key = |text: &str| {
        let mut request = Request::new(request("slow", text));
        request.metadata_mut().insert("authorization", "Bearer k".parse().unwrap());
        request
    };
    let mut first = server.client().await.stream(with_key("go")).await.unwrap().into_inner();
    first.message().await.unwrap().expect("the run started");
    let refused = server.client().await.stream(with_key("more")).await.unwrap_err();
    assert!(
        refused
            .message()
            .contains("API key `batch` already has 1 runs in flight ([[auth.keys]] max_concurrent_runs)"),
        "{}",
        refused.message()
    );
    let scraped = common::scrape_metrics(&server).await;
    let line = scraped
        .lines()
        .find(|line| {
            line.starts_with("agentwire_runs_refused_total{limit=\"max_concurrent_runs_per_caller\"}")
        })
        .unwrap_or_else(|| panic!("no refusal counted in\n{scraped}"));
    assert!(line.rsplit(' ').next().unwrap().parse::<f64>().unwrap() >= 2.0, "{line}");
}

/// A run longer than max_run_ms ends with an error chunk and saves nothing.
#[tokio::test]
async fn a_run_over_max_run_ms_ends_with_an_error_and_saves_nothing() {
    let server = TestServer::start(CONFIG).await;
    let chunks = server.stream(in_thread("slow", "go", "t")).await;
    let failure = error(&chunks).expect("an error chunk");
    assert!(failure.message.contains("max_run_ms (300 ms)"), "{}", failure.message);
    assert!(server.stored_texts("t").await.is_empty(), "nothing saved");
}

/// A key over its per-second rate is refused with RESOURCE_EXHAUSTED naming the rate.
#[tokio::test]
async fn a_key_over_its_rate_is_refused() {
    let server = TestServer::start(
        r#"
[[auth.keys]]
name = "batch-job"
key = "k"
resources = ["*"]
rate_per_second = 1
burst = 2

[[agents]]
id = "echo"
model = "mock/echo"
"#,
    )
    .await;
    let mut agents = AgentServiceClient::new(server.channel().await);
    let call = || {
        let mut request = Request::new(pb::ListAgentsRequest {});
        request.metadata_mut().insert("authorization", "Bearer k".parse().unwrap());
        request
    };
    agents.list_agents(call()).await.expect("within the burst");
    agents.list_agents(call()).await.expect("within the burst");
    let refused = agents.list_agents(call()).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(
        refused.message().contains("`batch-job`") && refused.message().contains("rate limit of 1"),
        "{}",
        refused.message()
    );
}

const SMALL_MESSAGES: &str = r#"
[limits]
max_message_bytes = 64
max_steps = 3

[[agents]]
id = "echo"
model = "mock/echo"

[[agents]]
id = "looping"
model = "mock/script"
script = [{ tool_calls = [{ name = "calculator", args = { expression = "1 + 1" } }] }]
tools = ["calculator"]
"#;

/// A message over `max_message_bytes` is refused, naming the message, its size and the limit;
/// one within it runs, whatever else the request holds.
#[tokio::test]
async fn messages_over_max_message_bytes_are_refused() {
    let server = TestServer::start(SMALL_MESSAGES).await;
    let refused = server.client().await.generate(request("echo", &"x".repeat(65))).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert_eq!(refused.message(), "messages[0]: 65 bytes exceeds the limit limits.max_message_bytes = 64");

    let text = |text: &str| pb::Message {
        role: "user".into(),
        parts: vec![pb::Part { part: Some(pb::part::Part::Text(pb::TextPart { text: text.into() })) }],
        ..Default::default()
    };
    let two = pb::RunRequest {
        agent_id: "echo".into(),
        messages: vec![text(&"a".repeat(60)), text(&"b".repeat(70))],
        ..Default::default()
    };
    let refused = server.client().await.generate(two).await.unwrap_err();
    assert!(refused.message().starts_with("messages[1]: 70 bytes"), "{}", refused.message());
    assert_eq!(
        server.generate(request("echo", &"x".repeat(64))).await.text,
        format!("echo: {}", "x".repeat(64))
    );
}

/// `[limits] max_steps` caps every run: a request may not ask for more, an agent's default
/// yields to it, and an agent that names more does not start.
#[tokio::test]
async fn steps_are_capped_server_wide() {
    let server = TestServer::start(SMALL_MESSAGES).await;
    let asked = pb::RunRequest { max_steps: Some(4), ..request("looping", "go") };
    let refused = server.client().await.generate(asked).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("max_steps") && refused.message().contains("limits.max_steps = 3"));

    let looped = server.generate(request("looping", "go")).await;
    assert_eq!(looped.steps.len(), 3, "the agent's default of 5 steps yields to the limit");

    let config =
        format!("{SMALL_MESSAGES}\n[[agents]]\nid = \"greedy\"\nmodel = \"mock/echo\"\nmax_steps = 10\n");
    let config = agentwire::config::Config::parse(&config).unwrap();
    let Err(error) = agentwire::runtime::Runtime::new(&config, agentwire::runtime::Components::builtin())
    else {
        panic!("an agent over the limit does not start");
    };
    let error = error.to_string();
    assert!(error.contains("max_steps") && error.contains("limits.max_steps = 3"), "{error}");
}

/// A request body that is not a protobuf message is the client's error: INVALID_ARGUMENT, for a
/// unary call and a streaming one alike (tonic would say INTERNAL).
#[tokio::test]
async fn a_malformed_request_body_is_invalid_argument() {
    let server = TestServer::start(CONFIG).await;
    for method in ["/agentwire.v1.AgentService/Generate", "/agentwire.v1.AgentService/Stream"] {
        let mut grpc = tonic::client::Grpc::new(server.channel().await);
        grpc.ready().await.unwrap();
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(method);
        let garbage = vec![0xff, 0xff, 0xff, 0xff];
        let refused = if method.ends_with("Generate") {
            grpc.unary(Request::new(garbage), path, RawCodec).await.map(|_| ()).unwrap_err()
        } else {
            grpc.server_streaming(Request::new(garbage), path, RawCodec).await.map(|_| ()).unwrap_err()
        };
        assert_eq!(refused.code(), Code::InvalidArgument, "{method}: {refused:?}");
        assert!(refused.message().contains("failed to decode"), "{}", refused.message());
    }
}

/// Ids longer than ids may be are refused with INVALID_ARGUMENT naming the field (they are
/// storage keys), and no error echoes what the caller sent at full length: a long role comes
/// back cut, so the status stays far below any client's header limit.
#[tokio::test]
async fn long_ids_are_refused_and_errors_never_echo_at_full_length() {
    let server = TestServer::start(&CONFIG.replace("max_request_bytes = 2048\n", "")).await;
    let long = "x".repeat(100_000);
    let mut run = request("echo", "hi");
    run.thread_id = long.clone();
    let refused = server.client().await.generate(run).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.message().starts_with("thread_id: 100000 bytes is longer than an id may be"),
        "{}",
        refused.message()
    );

    let refused = server.client().await.generate(request(&long, "hi")).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "not NOT_FOUND echoing the id: {refused:?}");

    let mut memory =
        agentwire::server::pb::memory_service_client::MemoryServiceClient::new(server.channel().await);
    let lookup = pb::GetThreadRequest { thread_id: long.clone(), ..Default::default() };
    assert_eq!(memory.get_thread(lookup).await.unwrap_err().code(), Code::InvalidArgument);

    let mut run = request("echo", "");
    run.messages = vec![pb::Message { role: long, ..common::message("user", "hi") }];
    let refused = server.client().await.generate(run).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().len() <= 1024, "{} bytes", refused.message().len());
    assert!(refused.message().starts_with("messages[0].role: unknown role"), "{}", &refused.message()[..60]);
    assert!(refused.message().ends_with("more bytes)"), "{}", &refused.message()[900..]);
}

/// The gRPC port holds at most `[limits] max_connections`: a connection past it is not served
/// until one closes (it waits to be accepted), then it is.
#[tokio::test]
async fn connections_past_max_connections_wait_for_one_to_close() {
    let server = TestServer::start(
        "[limits]\nmax_connections = 2\n\n[[agents]]\nid = \"echo\"\nmodel = \"mock/echo\"\n",
    )
    .await;
    let first = server.client().await;
    let second = server.client().await;
    for mut client in [first.clone(), second.clone()] {
        client.generate(request("echo", "in")).await.unwrap();
    }
    let third = tokio::spawn({
        let address = format!("http://{}", server.addr);
        async move {
            let channel = tonic::transport::Endpoint::from_shared(address).unwrap().connect().await.unwrap();
            AgentServiceClient::new(channel)
                .generate(request("echo", "third"))
                .await
                .unwrap()
                .into_inner()
                .text
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!third.is_finished(), "the third connection waits while two are open");
    drop((first, second));
    let text = tokio::time::timeout(std::time::Duration::from_secs(20), third).await;
    assert_eq!(text.expect("served once a connection closed").unwrap(), "echo: third");
}
