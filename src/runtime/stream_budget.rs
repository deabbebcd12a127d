//! What streaming runs may keep of chunks their clients have not read: `per_stream` bytes each
//! and `total` across the server (`[limits] max_stream_buffer_kb`, `max_buffered_mb`). A stream
//! at its own limit waits for its client, and is cut off after `slow_client_ms` as before. When
//! the server's total is reached, the stream holding the most is cut off at once and its unread
//! chunks dropped: a thousand clients that stop reading hold a bounded amount, and a client that
//! reads never waits for them.
//!
//! A stream's chunks wait in a channel whose receiving end both the client's stream and the
//! budget reach ([`StreamBuffer`]): cutting a stream off drains it there and then, whether or not
//! the connection ever asks for the rest (a client that stopped reading never does).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::domain::Chunk;

/// Chunks a stream keeps at most, whatever their size.
const CHUNKS_PER_STREAM: usize = 64;

/// Why a stream was cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutOff {
    /// Its client left no room for a chunk within `slow_client_ms`.
    SlowClient,
    /// The server's buffers were full and it held the most.
    BuffersFull,
}

impl CutOff {
    /// The setting that cut it off.
    pub fn setting(self) -> &'static str {
        match self {
            CutOff::SlowClient => "slow_client_ms",
            CutOff::BuffersFull => "max_buffered_mb",
        }
    }
}

/// The bytes every stream's unread chunks may take, and what they take now.
#[derive(Debug)]
pub struct StreamBudget {
    total: usize,
    per_stream: usize,
    used: AtomicUsize,
    streams: Mutex<HashMap<u64, Weak<StreamBuffer>>>,
    next_id: AtomicU64,
}

impl StreamBudget {
    /// A budget of `total` bytes, `per_stream` of them at most for one stream (both at least 1;
    /// a stream's share is never more than the total).
    pub fn new(total: usize, per_stream: usize) -> Arc<StreamBudget> {
        let total = total.max(1);
        Arc::new(StreamBudget {
            total,
            per_stream: per_stream.clamp(1, total).min(Semaphore::MAX_PERMITS),
            used: AtomicUsize::new(0),
            streams: Mutex::default(),
            next_id: AtomicU64::new(0),
        })
    }

    /// What unread chunks take now, in bytes.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    fn streams(&self) -> MutexGuard<'_, HashMap<u64, Weak<StreamBuffer>>> {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new stream's buffer: the sending end for its run, the stream for its client.
    pub fn open(self: &Arc<StreamBudget>) -> (ChunkSender, ChunkReceiver) {
        let (sender, receiver) = mpsc::channel(CHUNKS_PER_STREAM);
        let buffer = Arc::new(StreamBuffer {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            budget: Arc::clone(self),
            room: Arc::new(Semaphore::new(self.per_stream)),
            held: Arc::new(AtomicUsize::new(0)),
            cut: CancellationToken::new(),
            reason: OnceLock::new(),
            receiver: Mutex::new(receiver),
        });
        self.streams().insert(buffer.id, Arc::downgrade(&buffer));
        (ChunkSender { sender, buffer: Arc::clone(&buffer) }, ChunkReceiver { buffer })
    }

    /// Counts `bytes` more for `stream`; when the total would be passed, the stream holding the
    /// most is cut off first — `stream` itself when it is that one (then `Err`).
    fn reserve(&self, bytes: usize, stream: &StreamBuffer) -> Result<(), ()> {
        loop {
            let used = self.used.load(Ordering::Acquire);
            if used + bytes <= self.total {
                if self.used.compare_exchange(used, used + bytes, Ordering::AcqRel, Ordering::Acquire).is_ok()
                {
                    stream.held.fetch_add(bytes, Ordering::AcqRel);
                    return Ok(());
                }
                continue;
            }
            let heaviest = self
                .streams()
                .values()
                .filter_map(Weak::upgrade)
                .filter(|other| other.id != stream.id && !other.cut.is_cancelled())
                .max_by_key(|other| other.held());
            match heaviest {
                Some(other) if other.held() > stream.held() + bytes => other.cut_off(CutOff::BuffersFull),
                _ => {
                    stream.cut_off(CutOff::BuffersFull);
                    return Err(());
                }
            }
        }
    }
}

/// One stream's unread chunks.
#[derive(Debug)]
struct StreamBuffer {
    id: u64,
    budget: Arc<StreamBudget>,
    /// Its own share: a chunk takes its bytes until the client reads it.
    room: Arc<Semaphore>,
    /// Bytes its unread chunks take of the total.
    held: Arc<AtomicUsize>,
    cut: CancellationToken,
    /// Why it was cut off, once it was.
    reason: OnceLock<CutOff>,
    receiver: Mutex<mpsc::Receiver<BufferedChunk>>,
}

impl StreamBuffer {
    fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    fn receiver(&self) -> MutexGuard<'_, mpsc::Receiver<BufferedChunk>> {
        self.receiver.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cuts the stream off (the first reason given stays): its run stops at its next chunk, its
    /// unread chunks are dropped now, and its client's stream ends.
    fn cut_off(&self, reason: CutOff) {
        if self.reason.set(reason).is_ok() {
            tracing::warn!(limit = reason.setting(), "a streaming client was cut off");
            crate::telemetry::metrics::global().count(
                &crate::telemetry::metrics::SLOW_CLIENTS,
                &[("limit", reason.setting())],
                1,
            );
        }
        self.cut.cancel();
        self.drain();
    }

    /// Closes the stream to its run and drops its unread chunks.
    fn drain(&self) {
        let mut receiver = self.receiver();
        receiver.close();
        while receiver.try_recv().is_ok() {}
    }

    fn reason(&self) -> Option<CutOff> {
        self.reason.get().copied()
    }
}

impl Drop for StreamBuffer {
    fn drop(&mut self) {
        self.budget.streams().remove(&self.id);
    }
}

/// A chunk waiting for its client, with the bytes it takes (given back when it is read or
/// dropped).
#[derive(Debug)]
struct BufferedChunk {
    chunk: Chunk,
    _bytes: Taken,
}

/// Bytes a buffered chunk takes of its stream's share and of the total.
#[derive(Debug)]
struct Taken {
    bytes: usize,
    _room: OwnedSemaphorePermit,
    held: Arc<AtomicUsize>,
    budget: Arc<StreamBudget>,
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::AcqRel);
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Why a chunk was not buffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSent {
    /// The client is gone, or the stream was cut off.
    Gone,
    /// Its own share stayed full for the time given: the caller decides (cut off as slow).
    Full,
}

/// A run's end of its stream.
#[derive(Debug)]
pub struct ChunkSender {
    sender: mpsc::Sender<BufferedChunk>,
    buffer: Arc<StreamBuffer>,
}

impl ChunkSender {
    /// Buffers `chunk`, waiting until `deadline` for room in the stream's own share.
    pub async fn send(&self, chunk: Chunk, deadline: tokio::time::Instant) -> Result<(), NotSent> {
        let buffer = &self.buffer;
        let bytes = chunk.buffered_bytes().clamp(1, buffer.budget.per_stream);
        // A client that keeps up leaves room: no future, no timer, no waiter.
        let room = Arc::clone(&buffer.room).try_acquire_many_owned(bytes as u32);
        let (room, permit) = match (room, self.sender.try_reserve()) {
            (Ok(room), Ok(permit)) => (room, permit),
            (room, _) => {
                let wait = async {
                    let room = match room {
                        Ok(room) => room,
                        Err(_) => Arc::clone(&buffer.room)
                            .acquire_many_owned(bytes as u32)
                            .await
                            .map_err(|_| NotSent::Gone)?,
                    };
                    let permit = self.sender.reserve().await.map_err(|_| NotSent::Gone)?;
                    Ok::<_, NotSent>((room, permit))
                };
                tokio::select! {
                    biased;
                    waited = tokio::time::timeout_at(deadline, wait) => waited.map_err(|_| NotSent::Full)??,
                    () = buffer.cut.cancelled() => return Err(NotSent::Gone),
                }
            }
        };
        buffer.budget.reserve(bytes, buffer).map_err(|()| NotSent::Gone)?;
        let taken =
            Taken { bytes, _room: room, held: Arc::clone(&buffer.held), budget: Arc::clone(&buffer.budget) };
        permit.send(BufferedChunk { chunk, _bytes: taken });
        Ok(())
    }

    /// Cuts the stream off.
    pub fn cut_off(&self, reason: CutOff) {
        self.buffer.cut_off(reason);
    }

    /// Cancelled once the stream is cut off.
    pub fn cut(&self) -> &CancellationToken {
        &self.buffer.cut
    }

    /// Resolves when the client's end is gone.
    pub async fn closed(&self) {
        self.sender.closed().await;
    }
}

/// A client's end of its stream: the run's chunks until the run ends or the stream is cut off
/// ([`ChunkReceiver::cut_off`] then says why).
#[derive(Debug)]
pub struct ChunkReceiver {
    buffer: Arc<StreamBuffer>,
}

impl ChunkReceiver {
    /// Why the stream was cut off, if it was.
    pub fn cut_off(&self) -> Option<CutOff> {
        self.buffer.reason()
    }

    /// Tells, once the stream has ended, why it was cut off, if it was.
    pub fn cut_off_watch(&self) -> impl Fn() -> Option<CutOff> + Send + Sync + 'static {
        let buffer = Arc::clone(&self.buffer);
        move || buffer.reason()
    }
}

impl Drop for ChunkReceiver {
    /// The client went away: the run sees its stream closed, and what it left unread is dropped.
    fn drop(&mut self) {
        self.buffer.drain();
    }
}

impl Stream for ChunkReceiver {
    type Item = Chunk;

    fn poll_next(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Chunk>> {
        self.buffer.receiver().poll_recv(context).map(|buffered| buffered.map(|buffered| buffered.chunk))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::*;

    fn text(bytes: usize) -> Chunk {
        Chunk::TextDelta { id: String::new(), text: "x".repeat(bytes - crate::domain::CHUNK_OVERHEAD) }
    }

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_millis(50)
    }

    /// A stream at its own share waits for its client, and goes on once the client reads.
    #[tokio::test]
    async fn a_stream_at_its_share_waits_for_its_client() {
        let budget = StreamBudget::new(10_000, 1_000);
        let (sender, mut receiver) = budget.open();
        sender.send(text(600), soon()).await.unwrap();
        assert_eq!(sender.send(text(600), soon()).await, Err(NotSent::Full));
        assert_eq!(budget.used(), 600);
        receiver.next().await.unwrap();
        assert_eq!(budget.used(), 0, "read chunks give their bytes back");
        sender.send(text(600), soon()).await.unwrap();
    }

    /// When the total is reached, the stream holding the most is cut off, its unread chunks
    /// dropped at once; a lighter stream goes on, and the heaviest sender is the one cut when it
    /// is the one asking.
    #[tokio::test]
    async fn the_heaviest_stream_is_cut_off_when_the_total_is_reached() {
        let budget = StreamBudget::new(1_500, 1_000);
        let (stalled, stalled_client) = budget.open();
        stalled.send(text(900), soon()).await.unwrap();
        let (reading, _reading_client) = budget.open();
        reading.send(text(500), soon()).await.unwrap();
        reading.send(text(300), soon()).await.unwrap();
        assert_eq!(stalled_client.cut_off(), Some(CutOff::BuffersFull));
        assert!(stalled.cut().is_cancelled());
        assert_eq!(budget.used(), 800, "the stalled stream's chunk was dropped");
        assert_eq!(stalled.send(text(100), soon()).await, Err(NotSent::Gone));

        let (heavy, heavy_client) = budget.open();
        heavy.send(text(700), soon()).await.unwrap();
        assert_eq!(heavy.send(text(300), soon()).await, Err(NotSent::Gone));
        assert_eq!(heavy_client.cut_off(), Some(CutOff::BuffersFull), "it would hold the most");
        assert_eq!(budget.used(), 800, "its chunks went too");
    }
}
