//! Limits on what callers may ask: a token bucket per API key (requests per second), and slots
//! for concurrent runs (a run waits a little for one, then is refused), of which one caller — an
//! API key, or without keys a connection — may hold only its share, so that no caller can take
//! every slot from the others. Each refusal names its limit and the limit's value.

use std::collections::HashMap;
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
    /// The caller already has its share of the slots in flight.
    #[error("{caller} already has {max} runs in flight ({limit}); wait for one to end")]
    CallerBusy {
        /// `API key `name`` or `connection from ADDR`.
        caller: String,
        /// Its share.
        max: usize,
        /// The setting that gave it.
        limit: &'static str,
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

/// Who holds a run slot, for its share: an API key, or without keys the connection it came on.
/// (A key's name comes with one share, so the pair identifies the caller as the name does.)
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Caller {
    /// A key, by name, with its own share if it sets one (`[[auth.keys]] max_concurrent_runs`).
    Key {
        /// The key's name.
        name: String,
        /// Its own share.
        share: Option<usize>,
    },
    /// A connection without a key, by its peer address (in-process callers, the console, share
    /// one).
    Connection(Option<std::net::SocketAddr>),
}

impl Caller {
    fn describe(&self) -> String {
        match self {
            Caller::Key { name, .. } => format!("API key `{name}`"),
            Caller::Connection(Some(address)) => format!("the connection from {address}"),
            Caller::Connection(None) => "the console".to_owned(),
        }
    }
}

/// Runs in flight per caller (only callers with runs in flight are kept).
type Held = Arc<Mutex<HashMap<Caller, usize>>>;

/// Slots for runs in flight, and each caller's share of them.
#[derive(Debug, Clone, Default)]
pub(super) struct RunSlots {
    slots: Option<Arc<Semaphore>>,
    max: usize,
    queue_timeout: Duration,
    /// `[limits] max_concurrent_runs_per_caller` (0: no share).
    per_caller: usize,
    held: Held,
}

/// One run counted in its caller's share: the counts, and the caller.
#[derive(Debug)]
struct Share {
    held: Held,
    caller: Caller,
}

/// One run's slot: given back, and its caller's count lowered, when dropped.
#[derive(Debug)]
pub(super) struct Slot {
    _permit: Option<OwnedSemaphorePermit>,
    share: Option<Share>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(Share { held, caller }) = self.share.take() {
            let mut held = held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(count) = held.get_mut(&caller) {
                *count -= 1;
                if *count == 0 {
                    held.remove(&caller);
                }
            }
        }
    }
}

impl RunSlots {
    pub(super) fn new(limits: &LimitsConfig) -> RunSlots {
        RunSlots {
            slots: (limits.max_concurrent_runs > 0)
                .then(|| Arc::new(Semaphore::new(limits.max_concurrent_runs))),
            max: limits.max_concurrent_runs,
            queue_timeout: Duration::from_millis(limits.queue_timeout_ms),
            per_caller: limits.max_concurrent_runs_per_caller,
            held: Arc::default(),
        }
    }

    /// A slot for one run of `caller`, held until it drops. A caller at its share is refused at
    /// once (only its own runs could make room); otherwise the run waits up to
    /// `queue_timeout_ms` for a slot.
    pub(super) async fn acquire(&self, caller: &Caller) -> Result<Slot, LimitError> {
        let share = self.take_share(caller)?;
        let mut slot = Slot { _permit: None, share };
        let Some(slots) = &self.slots else { return Ok(slot) };
        match tokio::time::timeout(self.queue_timeout, Arc::clone(slots).acquire_owned()).await {
            Ok(Ok(permit)) => {
                slot._permit = Some(permit);
                Ok(slot)
            }
            _ => Err(LimitError::Busy {
                max: self.max,
                waited_ms: u64::try_from(self.queue_timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// Counts one more run of `caller`, unless it is at its share.
    fn take_share(&self, caller: &Caller) -> Result<Option<Share>, LimitError> {
        let (share, limit) = match caller {
            Caller::Key { share: Some(share), .. } => (*share, "[[auth.keys]] max_concurrent_runs"),
            _ => (self.per_caller, "limits.max_concurrent_runs_per_caller"),
        };
        if share == 0 {
            return Ok(None);
        }
        let mut held = self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = held.entry(caller.clone()).or_default();
        if *count >= share {
            return Err(LimitError::CallerBusy { caller: caller.describe(), max: share, limit });
        }
        *count += 1;
        Ok(Some(Share { held: Arc::clone(&self.held), caller: caller.clone() }))
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

    /// A caller at its share is refused at once while others still get slots; a run that ends
    /// gives its caller's share back; a key's own share overrides the default.
    #[tokio::test]
    async fn a_caller_holds_at_most_its_share() {
        let limits =
            LimitsConfig { max_concurrent_runs: 4, max_concurrent_runs_per_caller: 2, ..Default::default() };
        let slots = RunSlots::new(&limits);
        let greedy = Caller::Connection(Some("127.0.0.1:5000".parse().unwrap()));
        let first = slots.acquire(&greedy).await.unwrap();
        let _second = slots.acquire(&greedy).await.unwrap();
        let refused = slots.acquire(&greedy).await.unwrap_err();
        assert!(matches!(refused, LimitError::CallerBusy { max: 2, .. }), "{refused:?}");
        assert!(refused.to_string().contains("127.0.0.1:5000"), "{refused}");
        let other = Caller::Connection(Some("127.0.0.1:5001".parse().unwrap()));
        let _others = slots.acquire(&other).await.unwrap();
        drop(first);
        let _again = slots.acquire(&greedy).await.expect("a run that ended gave its share back");
        let key = Caller::Key { name: "batch".into(), share: Some(1) };
        let _one = slots.acquire(&key).await.unwrap();
        let refused = slots.acquire(&key).await.unwrap_err();
        assert!(refused.to_string().contains("[[auth.keys]] max_concurrent_runs"), "{refused}");
    }
}
