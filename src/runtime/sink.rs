//! Where a run's chunks go: a channel to a streaming client, or nowhere for a unary call.

use tokio::sync::mpsc;

use crate::domain::Chunk;

/// The client is gone; the run must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientGone;

/// The destination of a run's chunks.
#[derive(Debug, Clone)]
pub struct ChunkSink {
    sender: Option<mpsc::Sender<Chunk>>,
}

impl ChunkSink {
    /// Streams chunks into `sender`; the run stops when its receiver is dropped.
    pub fn channel(sender: mpsc::Sender<Chunk>) -> ChunkSink {
        ChunkSink { sender: Some(sender) }
    }

    /// Drops every chunk (the unary call gets the result instead).
    pub fn discard() -> ChunkSink {
        ChunkSink { sender: None }
    }

    /// Delivers a chunk, waiting when the client reads slowly.
    pub async fn send(&self, chunk: Chunk) -> Result<(), ClientGone> {
        match &self.sender {
            Some(sender) => sender.send(chunk).await.map_err(|_| ClientGone),
            None => Ok(()),
        }
    }

    /// Resolves when the client is gone; never for a discarding sink.
    pub async fn closed(&self) {
        match &self.sender {
            Some(sender) => sender.closed().await,
            None => std::future::pending().await,
        }
    }
}
