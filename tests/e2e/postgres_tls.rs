//! The PostgreSQL store over TLS (`sslmode` in the URL, `[storage.postgres] ca_file`): against
//! a server that only speaks TLS, the store connects when it trusts the server's CA and refuses
//! otherwise — it never falls back to plain TCP — and a served run's memory goes over it.

use std::time::Duration;

use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::storage::{PgOptions, PgStore, Store, StoreError};

use crate::common::binary::Served;
use crate::common::{pg_tls_proxy, postgres};

/// A fresh database behind a TLS-only proxy: the proxy, the URL of the database through it
/// (with `sslmode`, when given), the plain URL, and the directory holding `ca.pem`.
async fn behind_tls(
    sslmode: Option<&str>,
) -> Option<(pg_tls_proxy::TlsProxy, String, String, tempfile::TempDir)> {
    let url = postgres::fresh_database().await?;
    let dir = tempfile::tempdir().unwrap();
    let proxy = pg_tls_proxy::start(pg_tls_proxy::host_port(&url), dir.path()).await;
    let (_, database) = url.rsplit_once('/').unwrap();
    let mode = sslmode.map(|mode| format!("?sslmode={mode}")).unwrap_or_default();
    let over_tls = format!("postgres://agentwire@{}/{database}{mode}", proxy.address);
    Some((proxy, over_tls, url, dir))
}

fn options(url: &str, ca_file: Option<std::path::PathBuf>) -> PgOptions {
    PgOptions {
        url: url.to_owned(),
        pool_size: 2,
        statement_timeout: Duration::from_secs(5),
        ef_search: 100,
        ca_file,
    }
}

/// Trusting the CA that signed the server's certificate, the store works over TLS (the proxy,
/// which relays only TLS sessions, saw them); trusting only the system's CAs, connecting fails
/// with UNAVAILABLE naming the certificate — with `sslmode=require` and with the default
/// `prefer` alike.
#[tokio::test]
async fn the_store_speaks_tls_and_verifies_the_server() {
    let Some((proxy, over_tls, _, dir)) = behind_tls(Some("require")).await else { return };
    let store = PgStore::connect(&options(&over_tls, Some(dir.path().join("ca.pem")))).await.unwrap();
    assert_eq!(store.usage("nobody").await.unwrap(), Default::default());
    assert!(proxy.sessions.load(std::sync::atomic::Ordering::SeqCst) >= 1);

    for url in [over_tls.clone(), over_tls.replace("?sslmode=require", "")] {
        let error = PgStore::connect(&options(&url, None)).await.unwrap_err();
        assert!(matches!(error, StoreError::Unavailable(_)), "{url}: {error:?}");
        assert!(error.to_string().contains("certificate"), "{url}: {error}");
    }
    let missing = PgStore::connect(&options(&over_tls, Some(dir.path().join("nope.pem")))).await.unwrap_err();
    assert!(missing.to_string().contains("cannot read ca_file"), "{missing}");
}

/// A served run keeps its memory over TLS: the server's `ca_file`, relative to its config file,
/// is the CA's; the run's messages are then in the database.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_keeps_memory_over_tls() {
    let Some((proxy, over_tls, plain, dir)) = behind_tls(Some("require")).await else { return };
    let config = dir.path().join("agentwire.toml");
    std::fs::write(
        &config,
        "[[agents]]\nid = \"echo\"\nmodel = \"mock/echo\"\nmemory = { last_messages = 2 }\n\n\
         [storage]\nbackend = \"postgres\"\n\n[storage.postgres]\nurl_env = \"AGENTWIRE_TLS_TEST_URL\"\nca_file = \"ca.pem\"\n",
    )
    .unwrap();
    let served =
        Served::start_with(&["--config", config.to_str().unwrap()], &[("AGENTWIRE_TLS_TEST_URL", &over_tls)]);
    let request = pb::RunRequest {
        agent_id: "echo".into(),
        text: "kept over tls".into(),
        thread_id: "t".into(),
        resource_id: "r".into(),
        ..Default::default()
    };
    let answer =
        AgentServiceClient::new(served.channel().await).generate(request).await.unwrap().into_inner();
    assert_eq!(answer.text, "echo: kept over tls");
    assert!(proxy.sessions.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    let stored = postgres::connect(&plain).await.last_messages("r", "t", 10).await.unwrap();
    assert_eq!(stored.len(), 2, "the run's two messages");
}
