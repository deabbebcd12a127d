//! Group commit: one transaction for every run saved, and one fsync for every write, that
//! arrived while the previous batch was written.
//!
//! A dedicated thread takes everything queued so far: the runs to save, which it commits
//! together in one transaction ([`Saves::commit`]), and the writers that committed their own
//! sled writes and wait for them to be durable. It then flushes once and answers them all, so
//! concurrent runs share transactions and fsyncs instead of paying one each. The vector file
//! is synced before the tree is flushed, so that no flushed pointer names a vector still in
//! flight; the slots deletes freed before the sync are free to write again once the flush is
//! done. A save its checks refuse is answered at once; the others once they are on disk.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, mpsc};

use tokio::sync::oneshot;

use super::StoreError;
use super::saves::{PendingSave, Saves};
use crate::storage::vector_file::VectorFile;

type Answer = oneshot::Sender<Result<(), StoreError>>;

/// What the committing thread is asked to do.
enum Job {
    /// Answer once everything committed before is on disk.
    Durable(Answer),
    /// Save a run, and answer once it is on disk.
    Save(Box<PendingSave>, Answer),
}

/// The committing thread's handle. Dropping it stops the thread and waits for it, so that the
/// database is closed (and its lock released) when the store is.
#[derive(Debug)]
pub(super) struct GroupCommit {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl GroupCommit {
    /// Starts the committing thread for `db`, its vector file and the trees runs are saved in.
    pub(super) fn start(
        db: sled::Db,
        vectors: Arc<VectorFile>,
        saves: Arc<Saves>,
    ) -> Result<GroupCommit, StoreError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("agentwire-flush".to_owned())
            .spawn(move || {
                while let Ok(first) = queue.recv() {
                    let mut waiting = Vec::new();
                    let mut batch = Vec::new();
                    let mut answers = Vec::new();
                    for job in std::iter::once(first).chain(queue.try_iter()) {
                        match job {
                            Job::Durable(answer) => waiting.push(answer),
                            Job::Save(save, answer) => {
                                batch.push(*save);
                                answers.push(answer);
                            }
                        }
                    }
                    if !batch.is_empty() {
                        // After a panic nobody knows which of the batch's transactions
                        // committed, so its vector slots are not given back: a slot freed while
                        // a committed message points into it would be overwritten. `agentwire
                        // compact` reclaims them, as it does slots freed before a restart.
                        let outcomes = catch_unwind(AssertUnwindSafe(|| saves.commit(&batch)))
                            .unwrap_or_else(|_| {
                                let failed = StoreError::Engine("saving a batch of runs panicked".to_owned());
                                vec![Err(failed); batch.len()]
                            });
                        for (answer, outcome) in answers.into_iter().zip(outcomes) {
                            match outcome {
                                Ok(()) => waiting.push(answer),
                                Err(error) => {
                                    let _ = answer.send(Err(error));
                                }
                            }
                        }
                    }
                    let flushed = vectors
                        .sync()
                        .map_err(|error| error.to_string())
                        .and_then(|freed| {
                            db.flush().map_err(|error| error.to_string())?;
                            vectors.flushed(freed);
                            Ok(())
                        })
                        .map_err(|error| StoreError::Unavailable(format!("flush failed: {error}")));
                    for answer in waiting {
                        let _ = answer.send(flushed.clone());
                    }
                }
            })
            .map_err(|error| StoreError::Engine(format!("cannot start the flush thread: {error}")))?;
        Ok(GroupCommit { jobs: Some(jobs), thread: Some(thread) })
    }

    /// Returns once everything committed before the call is on disk.
    pub(super) async fn durable(&self) -> Result<(), StoreError> {
        self.ask(Job::Durable).await
    }

    /// Saves a run with the others queued meanwhile, and returns once it is on disk.
    pub(super) async fn save(&self, save: PendingSave) -> Result<(), StoreError> {
        let save = Box::new(save);
        self.ask(|answer| Job::Save(save, answer)).await
    }

    async fn ask(&self, job: impl FnOnce(Answer) -> Job) -> Result<(), StoreError> {
        let (answer, answered) = oneshot::channel();
        let stopped = || StoreError::Unavailable("the flush thread stopped".to_owned());
        self.jobs.as_ref().ok_or_else(stopped)?.send(job(answer)).map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?
    }
}
