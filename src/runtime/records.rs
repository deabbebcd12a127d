//! Run records on their way to the store, off every run's path: [`RecordWriter::submit`] never
//! waits and wakes nobody but for the first record of a batch (when too many wait, the record is
//! dropped and counted), and one task writes them in batches (what arrives within 50 ms of the
//! first), then applies `[records]` retention now and then. A store that fails a write loses
//! those records, never a run.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::config::RecordsConfig;
use crate::domain::{RunRecord, now_millis};
use crate::storage::Store;

/// Records waiting for the writer at most.
const QUEUE: usize = 8192;

/// Records written in one batch at most; a batch this big is written without waiting for the
/// rest of its window.
const BATCH: usize = 256;

/// How long the writer gathers a batch after its first record: a record is in the store this
/// long after its run ended, and a busy server writes a batch, not a record, at a time.
const BATCH_WINDOW: Duration = Duration::from_millis(50);

/// Time between two applications of retention (`keep_days`).
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Retention also runs once a tenth of `max_runs` records were written since it last ran: the
/// store holds at most 10% more than `max_runs` between two runs of it.
const PRUNE_SHARE: u64 = 10;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// What waits for the writer.
#[derive(Debug, Default)]
struct Pending {
    records: Vec<RunRecord>,
    /// Answered once the records before them are written.
    flushes: Vec<oneshot::Sender<()>>,
    /// The runtime is gone: the writer writes what is left and ends.
    closed: bool,
}

impl Pending {
    /// Whether the writer should write now rather than wait for the rest of its window.
    fn urgent(&self) -> bool {
        self.records.len() >= BATCH || !self.flushes.is_empty() || self.closed
    }
}

/// The queue between the runs and the writer: a vector behind a lock, not a channel, so that a
/// run's record costs a push, and the writer is woken once a batch rather than once a record.
#[derive(Debug, Default)]
struct Queue {
    pending: Mutex<Pending>,
    wake: Notify,
}

impl Queue {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves a vector, which is still a vector.
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The runtime's writer of run records.
#[derive(Debug, Default)]
pub(super) struct RecordWriter {
    target: Option<(Arc<dyn Store>, RecordsConfig)>,
    /// The writer task's queue, started by the first record.
    queue: OnceLock<Arc<Queue>>,
}

impl RecordWriter {
    /// Records into `store` (none, or `[records] enabled = false`: no records).
    pub(super) fn new(store: Option<Arc<dyn Store>>, config: &RecordsConfig) -> RecordWriter {
        let target = store.filter(|_| config.enabled).map(|store| (store, config.clone()));
        RecordWriter { target, queue: OnceLock::new() }
    }

    fn queue(&self) -> Option<&Arc<Queue>> {
        let (store, config) = self.target.as_ref()?;
        Some(self.queue.get_or_init(|| {
            let queue = Arc::new(Queue::default());
            tokio::spawn(write_records(Arc::clone(store), config.clone(), Arc::clone(&queue)));
            queue
        }))
    }

    /// Queues `record` for the store.
    pub(super) fn submit(&self, record: RunRecord) {
        let Some(queue) = self.queue() else { return };
        let mut pending = queue.pending();
        if pending.records.len() >= QUEUE {
            drop(pending);
            crate::telemetry::metrics::global().count(
                &crate::telemetry::metrics::RUN_RECORDS_DROPPED,
                &[("cause", "queue full")],
                1,
            );
            return;
        }
        pending.records.push(record);
        let wake = pending.records.len() == 1 || pending.records.len() == BATCH;
        drop(pending);
        if wake {
            queue.wake.notify_one();
        }
    }

    /// Waits until every record submitted so far is written (or its write failed).
    pub(super) async fn flush(&self) {
        let Some(queue) = self.queue.get() else { return };
        let (done, written) = oneshot::channel();
        queue.pending().flushes.push(done);
        queue.wake.notify_one();
        let _ = written.await;
    }
}

impl Drop for RecordWriter {
    fn drop(&mut self) {
        if let Some(queue) = self.queue.get() {
            queue.pending().closed = true;
            queue.wake.notify_one();
        }
    }
}

async fn write_records(store: Arc<dyn Store>, config: RecordsConfig, queue: Arc<Queue>) {
    let mut pruned = Instant::now();
    let mut written_since_pruned = 0;
    let prune_after = (config.max_runs / PRUNE_SHARE).max(1);
    loop {
        queue.wake.notified().await;
        // The window opens with the first record; a full batch or a flush closes it early.
        let closes = Instant::now() + BATCH_WINDOW;
        while !queue.pending().urgent() && Instant::now() < closes {
            tokio::select! {
                () = queue.wake.notified() => {}
                () = tokio::time::sleep_until(closes) => {}
            }
        }
        let Pending { mut records, flushes, closed } = std::mem::take(&mut *queue.pending());
        while !records.is_empty() {
            let rest = records.split_off(records.len().min(BATCH));
            let count = records.len() as u64;
            written_since_pruned += count;
            if let Err(error) = store.save_run_records(records).await {
                tracing::warn!(%error, records = count, "run records were not saved");
                crate::telemetry::metrics::global().count(
                    &crate::telemetry::metrics::RUN_RECORDS_DROPPED,
                    &[("cause", "store")],
                    count,
                );
            }
            records = rest;
        }
        for done in flushes {
            let _ = done.send(());
        }
        if closed {
            return;
        }
        let many = config.max_runs > 0 && written_since_pruned >= prune_after;
        if many || pruned.elapsed() >= PRUNE_EVERY {
            (pruned, written_since_pruned) = (Instant::now(), 0);
            prune(store.as_ref(), &config).await;
        }
    }
}

/// Applies retention: records older than `keep_days`, then beyond `max_runs`.
async fn prune(store: &dyn Store, config: &RecordsConfig) {
    // Saturating: a `keep_days` of thousands of millennia keeps everything rather than overflow.
    let kept_ms = i64::try_from(config.keep_days).unwrap_or(i64::MAX).saturating_mul(DAY_MS);
    let before = (config.keep_days > 0).then(|| now_millis().saturating_sub(kept_ms));
    let keep = (config.max_runs > 0).then_some(config.max_runs);
    if before.is_none() && keep.is_none() {
        return;
    }
    if let Err(error) = store.prune_run_records(before, keep).await {
        tracing::warn!(%error, "run records were not pruned");
    }
}
