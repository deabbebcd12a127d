//! A PostgreSQL that runs out of space (SQLSTATE class 53: disk full, out of memory, a
//! configured limit) fails a write only when it is made — after its run did all its work. Once a
//! write fails so, the store reports itself not writable for a while: runs that would save are
//! refused up front (UNAVAILABLE, as sled's reserve refuses them) and health says NOT_SERVING;
//! then the next write is let through to find out whether the database takes writes again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::storage::{StoreError, Writability};

/// How long writes are refused after the database said it was out of space.
const REFUSED_FOR: Duration = Duration::from_secs(5);

/// The store's writability, as PostgreSQL's answers tell it.
#[derive(Debug, Clone)]
pub(super) struct SpaceWatch {
    writability: Arc<watch::Sender<Writability>>,
    /// The generation of the last refusal, so that only the newest one's timer lets writes back.
    refusals: Arc<AtomicU64>,
}

impl Default for SpaceWatch {
    fn default() -> SpaceWatch {
        SpaceWatch {
            writability: Arc::new(watch::Sender::new(Writability::Writable)),
            refusals: Arc::default(),
        }
    }
}

impl SpaceWatch {
    /// The state, to watch.
    pub(super) fn subscribe(&self) -> watch::Receiver<Writability> {
        self.writability.subscribe()
    }

    /// `result` of a write, noted: an out-of-space error refuses writes for [`REFUSED_FOR`]; a
    /// write that went through ends a refusal at once.
    pub(super) fn noted<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        match &result {
            Err(StoreError::OutOfSpace(reason)) => self.refuse(reason),
            Ok(_) => {
                self.writability.send_if_modified(|state| {
                    let refused = *state != Writability::Writable;
                    *state = Writability::Writable;
                    refused
                });
            }
            Err(_) => {}
        }
        result
    }

    fn refuse(&self, reason: &str) {
        let generation = self.refusals.fetch_add(1, Ordering::AcqRel) + 1;
        tracing::warn!(reason, "PostgreSQL is out of space: writes refused for {} s", REFUSED_FOR.as_secs());
        self.writability.send_replace(Writability::Failed(format!(
            "{reason}; writes are refused for a few seconds, then tried again"
        )));
        let watch = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(REFUSED_FOR).await;
            if watch.refusals.load(Ordering::Acquire) == generation {
                watch.writability.send_replace(Writability::Writable);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An out-of-space error refuses writes; a write that goes through ends the refusal; other
    /// errors change nothing.
    #[tokio::test]
    async fn out_of_space_refuses_writes_until_one_goes_through() {
        let watch = SpaceWatch::default();
        let state = watch.subscribe();
        let _ = watch.noted::<()>(Err(StoreError::Engine("other".into())));
        assert_eq!(*state.borrow(), Writability::Writable);
        let _ = watch.noted::<()>(Err(StoreError::OutOfSpace("disk full".into())));
        assert!(state.borrow().check().is_err(), "refused after running out of space");
        let _ = watch.noted(Ok(()));
        assert_eq!(*state.borrow(), Writability::Writable, "a write went through");
    }
}
