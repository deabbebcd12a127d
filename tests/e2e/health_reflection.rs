//! Health and reflection are served, so `grpcurl` and `grpc_health_probe` work with no protos;
//! a starting server reports its agent service NOT_SERVING until its processors that fail closed
//! have connected, or its startup grace has passed.

use crate::common;

use common::TestServer;
use tokio_stream::StreamExt;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The server and the agent service report SERVING.
#[tokio::test]
async fn health_reports_serving() {
    let server = TestServer::start(agentwire::config::DEFAULT_CONFIG).await;
    let mut health = HealthClient::new(server.channel().await);
    for service in ["", "agentwire.v1.AgentService"] {
        let response = health.check(HealthCheckRequest { service: service.to_owned() }).await.unwrap();
        assert_eq!(response.into_inner().status(), ServingStatus::Serving, "service `{service}`");
    }
}

/// The status of `service`, once it reads `wanted` (10 s at most).
async fn await_status(
    health: &mut HealthClient<tonic::transport::Channel>,
    service: &str,
    wanted: ServingStatus,
) {
    common::eventually_some(&format!("{service} {wanted:?}"), || {
        let mut health = health.clone();
        async move {
            let response = health.check(HealthCheckRequest { service: service.to_owned() }).await.ok()?;
            (response.into_inner().status() == wanted).then_some(())
        }
    })
    .await;
}

const GUARDED: &str = r#"
[processors.word-guard]
kind = "remote"

[processors.audit]
kind = "remote"
on_failure = "open"

[[agents]]
id = "guarded"
model = "mock/echo"
input_processors = ["word-guard", "audit"]
"#;

/// A server whose agent needs a remote processor that fails closed reports the agent service
/// NOT_SERVING (the server itself SERVING) until an instance connects — one that fails open is
/// not waited for — so a replica that restarts takes no traffic its runs would trip on.
#[tokio::test]
async fn the_agent_service_is_ready_once_its_processors_have_connected() {
    let server = TestServer::start(&format!("[remote]\nstartup_grace_ms = 60000\n{GUARDED}")).await;
    let mut health = HealthClient::new(server.channel().await);
    let check = |service: &'static str| {
        let mut health = health.clone();
        async move {
            health
                .check(HealthCheckRequest { service: service.to_owned() })
                .await
                .unwrap()
                .into_inner()
                .status()
        }
    };
    assert_eq!(check("agentwire.v1.AgentService").await, ServingStatus::NotServing);
    assert_eq!(check("").await, ServingStatus::Serving, "the server itself is up");
    let _guard = common::remote::serve(
        server.channel().await,
        "word-guard",
        &[agentwire::server::pb::Hook::ProcessInput],
        std::sync::Arc::new(|_| common::remote::cont()),
    )
    .await;
    await_status(&mut health, "agentwire.v1.AgentService", ServingStatus::Serving).await;
}

/// Past `[remote] startup_grace_ms` the agent service serves although the processor never
/// came: runs then follow its failure policy.
#[tokio::test]
async fn the_agent_service_serves_once_the_startup_grace_has_passed() {
    let server = TestServer::start(&format!("[remote]\nstartup_grace_ms = 300\n{GUARDED}")).await;
    let mut health = HealthClient::new(server.channel().await);
    await_status(&mut health, "agentwire.v1.AgentService", ServingStatus::Serving).await;
}

/// Reflection v1 and v1alpha both list the services.
#[tokio::test]
async fn reflection_lists_services_in_both_versions() {
    use tonic_reflection::pb::{v1, v1alpha};
    let server = TestServer::start(agentwire::config::DEFAULT_CONFIG).await;
    let expected = ["agentwire.v1.AgentService", "grpc.health.v1.Health"];

    let mut v1_client = v1::server_reflection_client::ServerReflectionClient::new(server.channel().await);
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(String::new())),
    };
    let mut answers =
        v1_client.server_reflection_info(tokio_stream::once(request)).await.unwrap().into_inner();
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(listed)) =
        answers.next().await.unwrap().unwrap().message_response
    else {
        panic!("a service list")
    };
    let names: Vec<String> = listed.service.into_iter().map(|service| service.name).collect();
    for service in expected {
        assert!(names.iter().any(|name| name == service), "v1 lists {service}: {names:?}");
    }

    let mut alpha_client =
        v1alpha::server_reflection_client::ServerReflectionClient::new(server.channel().await);
    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            v1alpha::server_reflection_request::MessageRequest::ListServices(String::new()),
        ),
    };
    let mut answers =
        alpha_client.server_reflection_info(tokio_stream::once(request)).await.unwrap().into_inner();
    let Some(v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(listed)) =
        answers.next().await.unwrap().unwrap().message_response
    else {
        panic!("a service list")
    };
    let names: Vec<String> = listed.service.into_iter().map(|service| service.name).collect();
    for service in expected {
        assert!(names.iter().any(|name| name == service), "v1alpha lists {service}: {names:?}");
    }
}
