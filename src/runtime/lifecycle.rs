//! The runtime's lifecycle: the runs in flight, and a graceful shutdown — new runs refused,
//! runs in flight given a grace period to finish, then stopped (an error chunk each, nothing
//! saved).

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::RunError;

/// How long stopped runs may take to send their last chunk (a client that does not read gets
/// it no later than this).
pub(super) const CONCLUDE_GRACE: Duration = Duration::from_secs(1);

/// Runs in flight, and whether the runtime is shutting down.
#[derive(Debug, Default)]
pub(super) struct Lifecycle {
    draining: CancellationToken,
    stop: CancellationToken,
    runs: TaskTracker,
}

/// What a shutdown found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Runs in flight when it began.
    pub in_flight: usize,
    /// Of those, runs still going at the end of the grace period, stopped.
    pub stopped: usize,
}

impl Lifecycle {
    /// A new run's place among the runs in flight; refused once shutdown began.
    pub(super) fn admit(&self) -> Result<TaskTrackerToken, RunError> {
        if self.draining.is_cancelled() {
            return Err(RunError::ShuttingDown);
        }
        Ok(self.runs.token())
    }

    /// Cancelled when runs in flight must stop.
    pub(super) fn stop(&self) -> &CancellationToken {
        &self.stop
    }

    /// Refuses new runs, lets those in flight finish within `grace`, then stops the rest and
    /// waits for them to conclude — at most [`CONCLUDE_GRACE`], whatever their clients do.
    pub(super) async fn shut_down(&self, grace: Duration) -> ShutdownReport {
        self.draining.cancel();
        self.runs.close();
        let in_flight = self.runs.len();
        let mut stopped = 0;
        if tokio::time::timeout(grace, self.runs.wait()).await.is_err() {
            stopped = self.runs.len();
            self.stop.cancel();
            if tokio::time::timeout(CONCLUDE_GRACE, self.runs.wait()).await.is_err() {
                tracing::warn!(
                    runs = self.runs.len(),
                    "stopped runs still concluding: shutting down without them"
                );
            }
        }
        ShutdownReport { in_flight, stopped }
    }
}
