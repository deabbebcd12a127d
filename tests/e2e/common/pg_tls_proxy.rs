//! A PostgreSQL server that speaks TLS, for the tests of the store's TLS: the test PostgreSQL
//! (built without TLS) behind a proxy that answers the client's `SSLRequest` with `S`, does the
//! TLS handshake with a certificate of `certificates`' CA, and relays the decrypted stream.
//! A client that does not ask for TLS is hung up on.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use super::certificates::certificates;

/// The code of PostgreSQL's `SSLRequest`.
const SSL_REQUEST: u32 = 80_877_103;

/// The running proxy.
pub struct TlsProxy {
    /// `127.0.0.1:<port>`.
    pub address: String,
    /// TLS sessions handshaken so far.
    pub sessions: Arc<AtomicUsize>,
}

/// Starts a proxy to the PostgreSQL at `backend` (`host:port`), its certificates made in `dir`
/// (`ca.pem` is the CA a client must trust).
pub async fn start(backend: &str, dir: &Path) -> TlsProxy {
    certificates(dir);
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(dir.join("server.pem")).unwrap().collect::<Result<_, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let sessions = Arc::new(AtomicUsize::new(0));
    let (backend, counted) = (backend.to_owned(), sessions.clone());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (acceptor, backend, counted) = (acceptor.clone(), backend.clone(), counted.clone());
            tokio::spawn(async move {
                let _ = relay(client, &acceptor, &backend, &counted).await;
            });
        }
    });
    TlsProxy { address, sessions }
}

async fn relay(
    mut client: TcpStream,
    acceptor: &TlsAcceptor,
    backend: &str,
    sessions: &AtomicUsize,
) -> std::io::Result<()> {
    let mut request = [0u8; 8];
    client.read_exact(&mut request).await?;
    if request[..4] != 8u32.to_be_bytes() || request[4..] != SSL_REQUEST.to_be_bytes() {
        return Ok(()); // not asking for TLS: hung up on
    }
    client.write_all(b"S").await?;
    let mut tls = acceptor.accept(client).await?;
    sessions.fetch_add(1, Ordering::SeqCst);
    let mut backend = TcpStream::connect(backend).await?;
    tokio::io::copy_bidirectional(&mut tls, &mut backend).await?;
    Ok(())
}

/// `host:port` of a `postgres://user@host:port/database` URL.
pub fn host_port(url: &str) -> &str {
    let after_user = url.rsplit_once('@').map_or(url, |(_, rest)| rest);
    after_user.split_once('/').map_or(after_user, |(host_port, _)| host_port)
}
