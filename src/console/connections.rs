//! The console's connections, bounded: at most `[console] max_connections` at once (past it the
//! next is not accepted until one closes, so it waits in the kernel's queue and holds none of the
//! process's files), and each must send a request's whole header within `header_timeout_ms` of
//! connecting or of its last answer — a client that connects and says nothing, or trickles its
//! header, or keeps an idle connection open, is closed. The gRPC port has its own connections
//! and never waits for these.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::serve::Listener;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::Semaphore;

use crate::config::ConsoleConfig;

/// How many connections the console holds, and how long each may take over a request's header.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// From connecting, or from the last answer, to the end of the next request's header.
    pub header_timeout: Duration,
}

impl ConnectionLimits {
    /// The limits `[console]` sets.
    pub fn from_config(console: &ConsoleConfig) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: console.max_connections,
            header_timeout: Duration::from_millis(console.header_timeout_ms),
        }
    }
}

/// Serves `app` on the connections of `listener` within `limits`, for as long as polled.
pub(super) async fn serve<L: Listener>(mut listener: L, app: Router, limits: ConnectionLimits) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else { return };
        let (io, _) = listener.accept().await;
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(io), service);
            if let Err(error) = connection.await {
                tracing::debug!(%error, "console connection ended");
            }
            drop(slot);
        });
    }
}
