//! Where a run's chunks go: a channel to a streaming client, or nowhere for a unary call.
//!
//! Every send is bounded: a client that leaves no room for a chunk within its `slow_client`
//! limit is cut off, as is the stream holding the most when the server's stream buffers are
//! full (`stream_budget.rs`) — the run stops as if the client had gone (nothing saved unless it
//! finished), and the client's stream ends with a status saying why.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::stream_budget::{ChunkSender, CutOff, NotSent};
use crate::domain::Chunk;

/// The client is gone, or was cut off; the run must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientGone;

/// The destination of a run's chunks.
#[derive(Debug, Clone)]
pub struct ChunkSink {
    sender: Option<Arc<ChunkSender>>,
    slow_client: Duration,
    /// What the run holds while it runs (its slot), let go once it concludes — before its last
    /// chunk waits for a client that may not read.
    held: Arc<Mutex<Option<Held>>>,
}

/// A value a run holds while it runs.
struct Held(#[allow(dead_code)] Box<dyn Send>);

impl std::fmt::Debug for Held {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Held")
    }
}

impl ChunkSink {
    /// Whether chunks reach a client as they come (a `Stream`, not a `Generate`).
    pub fn streams(&self) -> bool {
        self.sender.is_some()
    }

    /// Streams chunks into `sender` (a stream of [`super::StreamBudget::open`]); the run stops
    /// when the client's end is dropped, when the client leaves no room for a chunk for
    /// `slow_client`, or when the server's stream buffers are full and this stream holds the most.
    pub fn channel(sender: ChunkSender, slow_client: Duration) -> ChunkSink {
        ChunkSink { sender: Some(Arc::new(sender)), slow_client, held: Arc::default() }
    }

    /// Keeps `value` (a run slot) until the run concludes: a stopped run's last chunk, which may
    /// wait up to the slow-client limit, no longer holds it.
    pub fn hold_while_running(&self, value: impl Send + 'static) {
        *self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Held(Box::new(value)));
    }

    /// Lets go of what [`ChunkSink::hold_while_running`] kept: the run has concluded.
    pub(super) fn concluded(&self) {
        let held = self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        drop(held);
    }

    /// Drops every chunk (the unary call gets the result instead).
    pub fn discard() -> ChunkSink {
        ChunkSink { sender: None, slow_client: Duration::MAX, held: Arc::default() }
    }

    /// Delivers a chunk, waiting at most the slow-client limit when the client reads slowly.
    pub async fn send(&self, chunk: Chunk) -> Result<(), ClientGone> {
        let Some(sender) = &self.sender else { return Ok(()) };
        if sender.cut().is_cancelled() {
            return Err(ClientGone);
        }
        let now = tokio::time::Instant::now();
        let deadline = now.checked_add(self.slow_client).unwrap_or(now + Duration::from_secs(86_400 * 365));
        match sender.send(chunk, deadline).await {
            Ok(()) => Ok(()),
            Err(NotSent::Gone) => Err(ClientGone),
            Err(NotSent::Full) => {
                sender.cut_off(CutOff::SlowClient);
                Err(ClientGone)
            }
        }
    }

    /// Resolves when the client is gone or cut off; never for a discarding sink.
    pub async fn closed(&self) {
        match &self.sender {
            Some(sender) => tokio::select! {
                () = sender.closed() => {}
                () = sender.cut().cancelled() => {}
            },
            None => std::future::pending().await,
        }
    }
}
