//! Limits on what callers may ask: a token bucket per API key (requests per second), and slots
//! for concurrent runs (a run waits a little for one, then is refused). Each refusal names its
//! limit and the limit's value.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::LimitsConfig;

/// Why a limit refused a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LimitError {
    /// A key went over its rate.
    #[error("API key `{key}` is over its rate limit of {rate} requests per second (burst {burst})")]
    Rate {
        /// The key's name.
        key: String,
        /// Its rate.
        rate: f64,
        /// Its burst.
        burst: u32,
    },
    /// Every run slot stayed taken.
    #[error(
        "the server is at max_concurrent_runs ({max}) and no run ended within queue_timeout_ms ({waited_ms})"
    )]
    Busy {
        /// The slots.
        max: usize,
        /// How long the run waited.
        waited_ms: u64,
    },
}

/// Requests per second, with a burst: a token bucket.
#[derive(Debug)]
pub(super) struct Rate {
    per_second: f64,
    burst: u32,
    /// Tokens left, and when they were counted.
    bucket: Mutex<(f64, Instant)>,
}

impl Rate {
    pub(super) fn new(per_second: f64, burst: Option<u32>) -> Result<Rate, String> {
        if !(per_second.is_finite() && per_second > 0.0) {
            return Err("`rate_per_second` must be a positive number".to_owned());
        }
        let burst = burst.unwrap_or_else(|| per_second.ceil() as u32).max(1);
        Ok(Rate { per_second, burst, bucket: Mutex::new((f64::from(burst), Instant::now())) })
    }

    /// Takes a token; the error names the key that went over.
    pub(super) fn take(&self, key: &str) -> Result<(), LimitError> {
        let mut bucket = self.bucket.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        let refilled = bucket.0 + now.duration_since(bucket.1).as_secs_f64() * self.per_second;
        *bucket = (refilled.min(f64::from(self.burst)), now);
        if bucket.0 < 1.0 {
            return Err(LimitError::Rate { key: key.to_owned(), rate: self.per_second, burst: self.burst });
        }
        bucket.0 -= 1.0;
        Ok(())
    }
}

/// Slots for runs in flight.
#[derive(Debug, Clone, Default)]
pub(super) struct RunSlots {
    slots: Option<Arc<Semaphore>>,
    max: usize,
    queue_timeout: Duration,
}

impl RunSlots {
    pub(super) fn new(limits: &LimitsConfig) -> RunSlots {
        RunSlots {
            slots: (limits.max_concurrent_runs > 0)
                .then(|| Arc::new(Semaphore::new(limits.max_concurrent_runs))),
            max: limits.max_concurrent_runs,
            queue_timeout: Duration::from_millis(limits.queue_timeout_ms),
        }
    }

    /// A slot for one run, held until the permit drops (`None` when runs are not limited).
    pub(super) async fn acquire(&self) -> Result<Option<OwnedSemaphorePermit>, LimitError> {
        let Some(slots) = &self.slots else { return Ok(None) };
        match tokio::time::timeout(self.queue_timeout, Arc::clone(slots).acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Some(permit)),
            _ => Err(LimitError::Busy {
                max: self.max,
                waited_ms: u64::try_from(self.queue_timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token bucket lets its burst through, then only its rate.
    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let rate = Rate::new(1000.0, Some(3)).unwrap();
        for _ in 0..3 {
            rate.take("k").unwrap();
        }
        assert!(matches!(rate.take("k"), Err(LimitError::Rate { burst: 3, .. })));
        std::thread::sleep(Duration::from_millis(5));
        rate.take("k").expect("refilled");
        assert!(Rate::new(0.0, None).is_err());
    }
}
