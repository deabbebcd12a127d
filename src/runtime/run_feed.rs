//! The live feed of runs beginning and ending (`RunService.WatchRuns`): a broadcast that costs a
//! run nothing while nobody watches, and never waits for a watcher — one that falls more than
//! [`FEED_CAPACITY`] events behind misses the oldest and is told how many.

use tokio::sync::broadcast;

use crate::domain::RunEvent;

/// Events a watcher may fall behind by.
pub const FEED_CAPACITY: usize = 1024;

/// The feed.
#[derive(Debug)]
pub(super) struct RunFeed(broadcast::Sender<RunEvent>);

impl Default for RunFeed {
    fn default() -> RunFeed {
        RunFeed(broadcast::channel(FEED_CAPACITY).0)
    }
}

impl RunFeed {
    /// Sends `event` to every watcher (none: nothing happens).
    pub(super) fn publish(&self, event: impl FnOnce() -> RunEvent) {
        if self.0.receiver_count() > 0 {
            let _ = self.0.send(event());
        }
    }

    /// A new watcher's receiver: the events from now on.
    pub(super) fn watch(&self) -> broadcast::Receiver<RunEvent> {
        self.0.subscribe()
    }
}
