//! HTTPS for the console, with `[tls]`'s certificate: connections are accepted and their
//! handshakes run concurrently (each within [`HANDSHAKE_TIMEOUT`]), so a client that stalls its
//! handshake holds up nobody else.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::ConsoleError;

/// How long a client may take over its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections whose handshake is done, waiting for the server to take them.
const READY_CONNECTIONS: usize = 64;

/// The acceptor of the certificate chain and key in these PEM files.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, ConsoleError> {
    let bad = |path: &Path, error: &dyn std::fmt::Display| {
        ConsoleError::Tls(format!("`{}`: {error}", path.display()))
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|error| bad(cert, &error))?
        .collect::<Result<_, _>>()
        .map_err(|error| bad(cert, &error))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|error| bad(key, &error))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|error| ConsoleError::Tls(error.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A listener of TLS connections, for `axum::serve`.
pub(super) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    address: std::io::Result<SocketAddr>,
}

impl TlsListener {
    /// Accepts on `listener`, each connection's handshake on a task of its own.
    pub(super) fn new(listener: TcpListener, acceptor: TlsAcceptor) -> TlsListener {
        let (sender, ready) = mpsc::channel(READY_CONNECTIONS);
        let address = listener.local_addr();
        tokio::spawn(async move {
            loop {
                let Ok((connection, address)) = listener.accept().await else { continue };
                let (acceptor, sender) = (acceptor.clone(), sender.clone());
                tokio::spawn(async move {
                    let _ = connection.set_nodelay(true);
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(connection)).await {
                        Ok(Ok(stream)) => {
                            let _ = sender.send((stream, address)).await;
                        }
                        Ok(Err(error)) => tracing::debug!(%address, %error, "console: TLS handshake failed"),
                        Err(_) => tracing::debug!(%address, "console: TLS handshake timed out"),
                    }
                });
            }
        });
        TlsListener { ready, address }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accepting task never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match &self.address {
            Ok(address) => Ok(*address),
            Err(error) => Err(std::io::Error::new(error.kind(), error.to_string())),
        }
    }
}
