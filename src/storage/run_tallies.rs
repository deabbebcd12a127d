//! The tallies of the newest runs, in memory: figures over a window (`GetStats`, polled by the
//! console with a window that moves) read each run's record once, then its tally. A record never
//! changes once written but for being replaced whole (a save of the same run again, which forgets
//! its tally) or deleted (the listing no longer names it; its tally goes with the resource's or
//! ages out).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::domain::RunTally;

/// Tallies kept at most: the newest runs' (run ids are UUIDv7, in the order runs began), more
/// than `GetStats` counts (10,000), so a window over the newest runs is all in memory. A few
/// hundred bytes each.
pub(super) const TALLIES_KEPT: usize = 16_384;

/// The tallies of the newest runs read so far, by run id.
#[derive(Debug, Default)]
pub(super) struct TallyCache {
    tallies: Mutex<BTreeMap<String, Arc<RunTally>>>,
}

impl TallyCache {
    fn locked(&self) -> MutexGuard<'_, BTreeMap<String, Arc<RunTally>>> {
        self.tallies.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tally of `run_id`, if kept.
    pub(super) fn get(&self, run_id: &str) -> Option<Arc<RunTally>> {
        self.locked().get(run_id).cloned()
    }

    /// Keeps `tally` (an older run's is let go again at once when the cache is full).
    pub(super) fn keep(&self, tally: Arc<RunTally>) {
        let mut tallies = self.locked();
        tallies.insert(tally.run_id.clone(), tally);
        while tallies.len() > TALLIES_KEPT {
            tallies.pop_first();
        }
    }

    /// Forgets the tallies of `run_ids` (their records are written again).
    pub(super) fn forget<'a>(&self, run_ids: impl IntoIterator<Item = &'a str>) {
        let mut tallies = self.locked();
        for run_id in run_ids {
            tallies.remove(run_id);
        }
    }

    /// Forgets the tallies of a resource's runs (its records are deleted).
    pub(super) fn forget_resource(&self, resource_id: &str) {
        self.locked().retain(|_, tally| tally.resource_id != resource_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::RunOutcome;

    fn tally(run_id: String, resource_id: &str) -> Arc<RunTally> {
        Arc::new(RunTally {
            run_id,
            agent_id: "a".into(),
            resource_id: resource_id.into(),
            thread_id: String::new(),
            started_at: 0,
            outcome: RunOutcome::Finished,
            tripwire: None,
            hooks: Vec::new(),
            warnings: Vec::new(),
        })
    }

    /// A full cache keeps the newest runs: the oldest id goes first, an older one is not kept.
    #[test]
    fn a_full_cache_keeps_the_newest_runs() {
        let cache = TallyCache::default();
        for run in 1..=TALLIES_KEPT + 1 {
            cache.keep(tally(format!("{run:08}"), "r"));
        }
        assert!(cache.get(&format!("{:08}", 1)).is_none(), "the oldest went");
        assert!(cache.get(&format!("{:08}", TALLIES_KEPT + 1)).is_some());
        cache.keep(tally(format!("{:08}", 0), "r"));
        assert!(cache.get(&format!("{:08}", 0)).is_none(), "an older run is not kept");
    }

    /// Forgetting by run and by resource drops exactly those tallies.
    #[test]
    fn forgetting_drops_exactly_the_named_tallies() {
        let cache = TallyCache::default();
        cache.keep(tally("1".into(), "alice"));
        cache.keep(tally("2".into(), "bob"));
        cache.keep(tally("3".into(), "alice"));
        cache.forget(["3"]);
        assert!(cache.get("3").is_none());
        cache.forget_resource("alice");
        assert!(cache.get("1").is_none());
        assert!(cache.get("2").is_some());
    }
}
