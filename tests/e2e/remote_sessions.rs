//! The life of a remote processor session: pings find hung instances, `max_concurrency` bounds
//! what one instance holds, per-hook modes and policies, and the drain on shutdown.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use agentwire::server::pb;
use agentwire::server::pb::processor_service_client::ProcessorServiceClient;
use common::remote::{Behaviour, abort, call_text, cont, hello_of, serve_hello, serve_with};
use common::{TestServer, request};

const CONFIG: &str = r#"
[remote]
ping_interval_ms = 100
drain_timeout_ms = 3000

[processors.guard]
kind = "remote"
timeout_ms = 5000

[processors.picky]
kind = "remote"
timeout_ms = 5000
hooks.processInput = { timeout_ms = 150, on_failure = "open" }

[[agents]]
id = "guarded"
model = "mock/echo"
input_processors = ["guard"]

[[agents]]
id = "picky"
model = "mock/echo"
input_processors = ["picky"]

[[agents]]
id = "inline"
model = "mock/echo"
input_processors = ["lowercase", { remote = "inline-guard", timeout_ms = 2000, on_failure = "closed" }]
"#;

async fn instances(server: &TestServer) -> Vec<String> {
    let mut client = ProcessorServiceClient::new(server.channel().await);
    let listed = client.list_processors(pb::ListProcessorsRequest {}).await.unwrap().into_inner();
    listed.instances.into_iter().map(|instance| instance.instance_id).collect()
}

/// An instance that answers pings stays; one that does not is dropped and its stream closed.
#[tokio::test]
async fn pings_drop_hung_instances() {
    let server = TestServer::start(CONFIG).await;
    let mut alive = hello_of("guard", &[pb::Hook::ProcessInput]);
    alive.instance_id = "alive".into();
    let mut hung = hello_of("guard", &[pb::Hook::ProcessInput]);
    hung.instance_id = "hung".into();
    let alive = serve_hello(server.channel().await, alive, Arc::new(|_| cont())).await;
    let hung = serve_with(
        server.channel().await,
        hung,
        Arc::new(|_| cont()),
        Behaviour { pong: false, ..Behaviour::default() },
    )
    .await;
    common::eventually("the hung instance's stream to end", || {
        hung.events().last().map(String::as_str) == Some("end")
    })
    .await;
    assert_eq!(instances(&server).await, ["alive"]);
    assert!(alive.events().iter().filter(|event| *event == "ping").count() >= 2, "{:?}", alive.events());
    assert!(!alive.events().contains(&"end".to_owned()));
    let result = server.generate(request("guarded", "still served")).await;
    assert_eq!(result.text, "echo: still served");
}

/// An instance with `max_concurrency = 1` never holds two calls; the others wait their turn.
#[tokio::test]
async fn max_concurrency_bounds_the_calls_an_instance_holds() {
    let server = TestServer::start(CONFIG).await;
    let mut hello = hello_of("guard", &[pb::Hook::ProcessInput]);
    hello.max_concurrency = 1;
    let behaviour = Behaviour { delay: Duration::from_millis(30), ..Behaviour::default() };
    let instance = serve_with(server.channel().await, hello, Arc::new(|_| cont()), behaviour).await;
    let runs: Vec<_> = (0..6)
        .map(|index| {
            let server_client = server.client();
            async move {
                let mut client = server_client.await;
                client.generate(request("guarded", &format!("run {index}"))).await.unwrap().into_inner()
            }
        })
        .collect();
    let results = futures::future::join_all(runs).await;
    assert!(results.iter().all(|result| result.finish_reason == "stop"), "{results:?}");
    assert_eq!(instance.most_in_flight(), 1);
}

/// An instance may ask to observe a hook: its calls are sent and never waited for.
#[tokio::test]
async fn an_instance_may_observe_a_hook() {
    let server = TestServer::start(CONFIG).await;
    let mut hello = hello_of("guard", &[pb::Hook::ProcessInput]);
    hello.hook_options.push(pb::HookOptions {
        hook: pb::Hook::ProcessInput as i32,
        mode: pb::HookMode::Observe as i32,
        ..Default::default()
    });
    let instance = serve_hello(server.channel().await, hello, Arc::new(|_| None)).await;
    let result = server.generate(request("guarded", "not waited for")).await;
    assert_eq!(result.text, "echo: not waited for");
    common::eventually("the observed call", || {
        instance.events().contains(&"call HOOK_PROCESS_INPUT".to_owned())
    })
    .await;
}

/// A hook's own timeout and policy override the processor's (mistakes there: tests/config.rs).
#[tokio::test]
async fn a_hook_may_have_its_own_timeout_and_policy() {
    let server = TestServer::start(CONFIG).await;
    let _silent =
        serve_hello(server.channel().await, hello_of("picky", &[pb::Hook::ProcessInput]), Arc::new(|_| None))
            .await;
    let result = server.generate(request("picky", "go on without it")).await;
    assert_eq!(result.text, "echo: go on without it");
    let skipped = &result.skipped_processors;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!((skipped[0].processor_id.as_str(), skipped[0].cause.as_str()), ("picky", "timeout"));
}

/// On shutdown the server tells instances to drain, lets the call in flight be answered, then
/// closes their streams.
#[tokio::test]
async fn shutdown_drains_instances() {
    let server = TestServer::start(CONFIG).await;
    let behaviour = Behaviour { delay: Duration::from_millis(300), ..Behaviour::default() };
    let instance = serve_with(
        server.channel().await,
        hello_of("guard", &[pb::Hook::ProcessInput]),
        Arc::new(|_| cont()),
        behaviour,
    )
    .await;
    let mut client = server.client().await;
    let run = tokio::spawn(async move { client.generate(request("guarded", "in flight")).await });
    common::eventually("the call to arrive", || {
        instance.events().contains(&"call HOOK_PROCESS_INPUT".to_owned())
    })
    .await;
    server.stop().await;
    let result = run.await.unwrap().expect("the run in flight completes").into_inner();
    assert_eq!(result.text, "echo: in flight", "{result:?} {:?}", instance.events());
    let events = instance.events();
    let drain = events.iter().position(|event| event == "drain").expect("a drain message");
    assert_eq!(events.last().map(String::as_str), Some("end"), "{events:?}");
    assert!(drain > events.iter().position(|event| event == "call HOOK_PROCESS_INPUT").unwrap());
}

/// A remote processor may be declared in place in an agent's list, at its position.
#[tokio::test]
async fn a_remote_processor_may_be_declared_inline() {
    let server = TestServer::start(CONFIG).await;
    let _guard = serve_hello(
        server.channel().await,
        hello_of("inline-guard", &[pb::Hook::ProcessInput]),
        // After `lowercase`: it sees the input lower-cased.
        Arc::new(|call| if call_text(call).contains("secret") { abort("no secrets") } else { cont() }),
    )
    .await;
    let result = server.generate(request("inline", "The SECRET")).await;
    let tripwire = result.tripwire.expect("a tripwire");
    assert_eq!((tripwire.processor_id.as_str(), tripwire.reason.as_str()), ("inline-guard", "no secrets"));
    assert_eq!(server.generate(request("inline", "Hello")).await.text, "echo: hello");
}
