//! Group commit: one fsync for every write that arrived while the previous one ran.
//!
//! Writers commit their sled transaction, then wait here for a flush. A dedicated thread takes
//! every waiter queued so far, flushes once, and answers them all, so concurrent runs share
//! fsyncs instead of paying one each. The vector file is synced before the tree is flushed, so
//! that no flushed pointer names a vector still in flight; the slots deletes freed before the
//! sync are free to write again once the flush is done.

use std::sync::{Arc, mpsc};

use tokio::sync::oneshot;

use super::StoreError;
use super::vector_file::VectorFile;

type Waiter = oneshot::Sender<Result<(), String>>;

/// The flushing thread's handle. Dropping it stops the thread and waits for it, so that the
/// database is closed (and its lock released) when the store is.
#[derive(Debug)]
pub(super) struct GroupCommit {
    waiters: Option<mpsc::Sender<Waiter>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        drop(self.waiters.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl GroupCommit {
    /// Starts the flushing thread for `db` and its vector file.
    pub(super) fn start(db: sled::Db, vectors: Arc<VectorFile>) -> Result<GroupCommit, StoreError> {
        let (waiters, queue) = mpsc::channel::<Waiter>();
        let thread = std::thread::Builder::new()
            .name("agentwire-flush".to_owned())
            .spawn(move || {
                while let Ok(first) = queue.recv() {
                    let mut batch = vec![first];
                    batch.extend(queue.try_iter());
                    let outcome = vectors.sync().map_err(|error| error.to_string()).and_then(|freed| {
                        db.flush().map_err(|error| error.to_string())?;
                        vectors.flushed(freed);
                        Ok(())
                    });
                    for waiter in batch {
                        let _ = waiter.send(outcome.clone());
                    }
                }
            })
            .map_err(|error| StoreError::Engine(format!("cannot start the flush thread: {error}")))?;
        Ok(GroupCommit { waiters: Some(waiters), thread: Some(thread) })
    }

    /// Returns once everything committed before the call is on disk.
    pub(super) async fn durable(&self) -> Result<(), StoreError> {
        let (sender, receiver) = oneshot::channel();
        let stopped = || StoreError::Unavailable("the flush thread stopped".to_owned());
        self.waiters.as_ref().ok_or_else(stopped)?.send(sender).map_err(|_| stopped())?;
        match receiver.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(StoreError::Unavailable(format!("flush failed: {error}"))),
            Err(_) => Err(stopped()),
        }
    }
}
