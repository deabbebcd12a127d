//! Who may even begin a processor session, and who may see the pool: a session that never says
//! `Hello` is closed after `hello_timeout_ms`, only `max_pending_hellos` may wait at once, a
//! session without a known token is refused before it says anything, and `ListProcessors` takes
//! an admin key once keys are configured.

use crate::common;

use std::time::Duration;

use agentwire::server::pb;
use agentwire::server::pb::processor_service_client::ProcessorServiceClient;
use common::TestServer;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

const CONFIG: &str = r#"
[remote]
hello_timeout_ms = 300
max_pending_hellos = 1

[processors.guard]
kind = "remote"

[[agents]]
id = "guarded"
model = "mock/echo"
input_processors = ["guard"]
"#;

/// Opens a session that says nothing (its sender is returned, so it stays open), with `token`.
async fn silent_session(
    server: &TestServer,
    token: Option<&str>,
) -> (Result<tonic::Streaming<pb::ServerMessage>, tonic::Status>, mpsc::Sender<pb::ProcessorMessage>) {
    let (sender, receiver) = mpsc::channel(1);
    let mut request = tonic::Request::new(ReceiverStream::new(receiver));
    if let Some(token) = token {
        request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    let response = ProcessorServiceClient::new(server.channel().await).connect(request).await;
    (response.map(tonic::Response::into_inner), sender)
}

/// A session that never says `Hello` is closed with DEADLINE_EXCEEDED naming the limit.
#[tokio::test]
async fn a_session_without_hello_is_closed() {
    let server = TestServer::start(CONFIG).await;
    let (response, _sender) = silent_session(&server, None).await;
    let status = response.expect_err("refused");
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert!(status.message().contains("hello_timeout_ms (300 ms)"), "{}", status.message());
}

/// While `max_pending_hellos` sessions wait to say `Hello`, another is refused at once.
#[tokio::test]
async fn waiting_sessions_are_capped() {
    let server =
        TestServer::start(&CONFIG.replace("hello_timeout_ms = 300", "hello_timeout_ms = 5000")).await;
    let waiting = {
        let server_channel = server.channel().await;
        tokio::spawn(async move {
            let (sender, receiver) = mpsc::channel::<pb::ProcessorMessage>(1);
            let response =
                ProcessorServiceClient::new(server_channel).connect(ReceiverStream::new(receiver)).await;
            drop(sender);
            response.map(|_| ())
        })
    };
    // The first session is waiting for its Hello by the time the second arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (response, _sender) = silent_session(&server, None).await;
    let status = response.expect_err("refused");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().contains("max_pending_hellos"), "{}", status.message());
    waiting.abort();
}

/// With processor tokens configured, a session without a known token is refused before it says
/// anything.
#[tokio::test]
async fn an_unknown_token_is_refused_before_hello() {
    let config =
        format!("{CONFIG}\n[[processor_tokens]]\ntoken = \"guard-token\"\nprocessors = [\"guard\"]\n");
    let server =
        TestServer::start(&config.replace("hello_timeout_ms = 300", "hello_timeout_ms = 60000")).await;
    for token in [None, Some("wrong")] {
        let (response, _sender) = silent_session(&server, token).await;
        assert_eq!(response.expect_err("refused").code(), Code::Unauthenticated, "{token:?}");
    }
}

/// Once keys are configured, `ListProcessors` takes an admin key: none is UNAUTHENTICATED, an
/// ordinary key PERMISSION_DENIED naming the rule, an admin key sees the pool.
#[tokio::test]
async fn listing_processors_takes_an_admin_key() {
    let config = format!(
        "{CONFIG}\n[[auth.keys]]\nname = \"app\"\nkey = \"app-key\"\nresources = [\"*\"]\n\n\
         [[auth.keys]]\nname = \"ops\"\nkey = \"ops-key\"\nresources = [\"*\"]\nadmin = true\n"
    );
    let server = TestServer::start(&config).await;
    let list = |key: Option<&'static str>| {
        let channel = server.channel();
        async move {
            let mut request = tonic::Request::new(pb::ListProcessorsRequest {});
            if let Some(key) = key {
                request.metadata_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
            }
            ProcessorServiceClient::new(channel.await).list_processors(request).await
        }
    };
    assert_eq!(list(None).await.expect_err("no key").code(), Code::Unauthenticated);
    let denied = list(Some("app-key")).await.expect_err("not an admin");
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert!(denied.message().contains("admin = true"), "{}", denied.message());
    assert!(list(Some("ops-key")).await.is_ok());
}
