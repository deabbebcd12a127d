//! Health and reflection are served, so `grpcurl` and `grpc_health_probe` work with no protos.

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
