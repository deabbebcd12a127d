//! Run records on their way to the store, off every run's path: [`RecordWriter::submit`] never
//! waits (when the queue is full the record is dropped and counted), and one task writes them in
//! batches (what arrives within 50 ms of the first), then applies `[records]` retention now and
//! then. A store that fails a write loses those records, never a run.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::config::RecordsConfig;
use crate::domain::{RunRecord, now_millis};
use crate::storage::Store;

/// Records waiting for the writer at most.
const QUEUE: usize = 8192;

/// Records written in one batch at most.
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

enum Queued {
    Record(Box<RunRecord>),
    /// Answered once everything queued before it is written.
    Flush(oneshot::Sender<()>),
}

/// The runtime's writer of run records.
#[derive(Debug, Default)]
pub(super) struct RecordWriter {
    target: Option<(Arc<dyn Store>, RecordsConfig)>,
    /// The writer task's queue, started by the first record.
    queue: OnceLock<mpsc::Sender<Queued>>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Queued")
    }
}

impl RecordWriter {
    /// Records into `store` (none, or `[records] enabled = false`: no records).
    pub(super) fn new(store: Option<Arc<dyn Store>>, config: &RecordsConfig) -> RecordWriter {
        let target = store.filter(|_| config.enabled).map(|store| (store, config.clone()));
        RecordWriter { target, queue: OnceLock::new() }
    }

    fn queue(&self) -> Option<&mpsc::Sender<Queued>> {
        let (store, config) = self.target.as_ref()?;
        Some(self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(QUEUE);
            tokio::spawn(write_records(Arc::clone(store), config.clone(), receiver));
            sender
        }))
    }

    /// Queues `record` for the store.
    pub(super) fn submit(&self, record: RunRecord) {
        let Some(queue) = self.queue() else { return };
        if queue.try_send(Queued::Record(Box::new(record))).is_err() {
            crate::telemetry::metrics::global().count(
                "agentwire_run_records_dropped_total",
                &[("cause", "queue full")],
                1,
            );
        }
    }

    /// Waits until every record submitted so far is written (or its write failed).
    pub(super) async fn flush(&self) {
        let Some(queue) = self.queue.get() else { return };
        let (done, written) = oneshot::channel();
        if queue.send(Queued::Flush(done)).await.is_ok() {
            let _ = written.await;
        }
    }
}

async fn write_records(store: Arc<dyn Store>, config: RecordsConfig, mut queue: mpsc::Receiver<Queued>) {
    let mut pruned = Instant::now();
    let mut written_since_pruned = 0;
    let prune_after = (config.max_runs / PRUNE_SHARE).max(1);
    let mut batch = Vec::with_capacity(BATCH);
    let mut flushes = Vec::new();
    while let Some(first) = queue.recv().await {
        let gathering = tokio::time::sleep(BATCH_WINDOW);
        tokio::pin!(gathering);
        let mut next = Some(first);
        while let Some(queued) = next.take() {
            match queued {
                Queued::Record(record) => batch.push(*record),
                // Whoever waits for a flush waits no longer than the write.
                Queued::Flush(done) => {
                    flushes.push(done);
                    break;
                }
            }
            if batch.len() < BATCH {
                next = tokio::select! {
                    queued = queue.recv() => queued,
                    () = &mut gathering => None,
                };
            }
        }
        if !batch.is_empty() {
            let records = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            let count = records.len() as u64;
            written_since_pruned += count;
            if let Err(error) = store.save_run_records(records).await {
                tracing::warn!(%error, records = count, "run records were not saved");
                crate::telemetry::metrics::global().count(
                    "agentwire_run_records_dropped_total",
                    &[("cause", "store")],
                    count,
                );
            }
        }
        for done in flushes.drain(..) {
            let _ = done.send(());
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
