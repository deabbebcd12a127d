//! `[tls]` with certificates made in the test: the server speaks TLS (a plaintext client gets
//! nowhere), and with `client_ca` it also demands a client certificate that CA signed.

use crate::common;

use std::path::Path;

use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use common::certificates::certificates;
use common::{TestServer, request};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

fn config(dir: &Path, mutual: bool) -> String {
    let path = |name: &str| dir.join(name).display().to_string();
    let client_ca = if mutual { format!("client_ca = \"{}\"\n", path("ca.pem")) } else { String::new() };
    format!(
        "[tls]\ncert = \"{}\"\nkey = \"{}\"\n{client_ca}\n[[agents]]\nid = \"echo\"\nmodel = \"mock/echo\"\n",
        path("server.pem"),
        path("server.key")
    )
}

async fn over_tls(
    server: &TestServer,
    dir: &Path,
    with_client_cert: bool,
) -> Result<pb::GenerateResponse, String> {
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let mut tls =
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read("ca.pem"))).domain_name("localhost");
    if with_client_cert {
        tls = tls.identity(Identity::from_pem(read("client.pem"), read("client.key")));
    }
    let channel = Channel::from_shared(format!("https://{}", server.addr))
        .unwrap()
        .tls_config(tls)
        .map_err(|error| error.to_string())?
        .connect()
        .await
        .map_err(|error| error.to_string())?;
    let answer = AgentServiceClient::new(channel).generate(request("echo", "over tls")).await;
    answer.map(|response| response.into_inner()).map_err(|status| status.to_string())
}

/// With [tls], the server answers over TLS and refuses plaintext.
#[tokio::test]
async fn the_server_speaks_tls() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let server = TestServer::start(&config(dir.path(), false)).await;
    assert_eq!(over_tls(&server, dir.path(), false).await.unwrap().text, "echo: over tls");
    let plaintext = Channel::from_shared(format!("http://{}", server.addr)).unwrap().connect().await;
    let refused = match plaintext {
        Ok(channel) => AgentServiceClient::new(channel).generate(request("echo", "hi")).await.is_err(),
        Err(_) => true,
    };
    assert!(refused, "plaintext gets nowhere");
}

/// With client_ca, a client without a certificate signed by it is refused.
#[tokio::test]
async fn mutual_tls_demands_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let server = TestServer::start(&config(dir.path(), true)).await;
    assert!(over_tls(&server, dir.path(), false).await.is_err(), "no client certificate");
    assert_eq!(over_tls(&server, dir.path(), true).await.unwrap().text, "echo: over tls");
}

/// Missing or malformed certificates stop start-up, naming `tls` or the missing file.
#[test]
fn bad_certificates_stop_start_up() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("server.pem"), "not a certificate").unwrap();
    std::fs::write(dir.path().join("server.key"), "not a key").unwrap();
    let config = agentwire::config::Config::parse(&config(dir.path(), false)).unwrap();
    let error = agentwire::server::ServeOptions::from_config(&config).unwrap_err().to_string();
    assert!(error.contains("tls"), "{error}");
    let missing =
        agentwire::config::Config::parse("[tls]\ncert = \"/nowhere.pem\"\nkey = \"/nowhere.key\"\n").unwrap();
    assert!(
        agentwire::server::ServeOptions::from_config(&missing)
            .unwrap_err()
            .to_string()
            .contains("/nowhere.pem")
    );
}
