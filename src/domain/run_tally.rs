//! What figures over many runs count of one run: its ids, when it began, how it ended, and its
//! hook calls' processors, times and decisions. A tally is a few hundred bytes where its record
//! can be kilobytes of JSON, so a store keeps the newest runs' tallies in memory and figures over
//! a window decode each record once, not once a call.

use super::{Hook, HookDecision, RunOutcome, RunRecord, TimelineEntry};

/// How a hook call counts in figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TalliedDecision {
    /// It went on (unchanged, replaced, dropped, observed).
    Passed,
    /// It aborted the run or the step.
    Aborted,
    /// It failed.
    Failed,
    /// It did not take part (the `open` policy).
    Skipped,
}

/// One entry of a run's hook calls (for `processOutputStream`, the calls of one step counted
/// together).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TalliedHook {
    /// The processor.
    pub processor_id: String,
    /// The hook.
    pub hook: Hook,
    /// Calls the entry counts (at least 1).
    pub calls: u64,
    /// Their time together, in microseconds.
    pub duration_us: u64,
    /// The longest of them, in microseconds.
    pub max_us: u64,
    /// What it decided.
    pub decision: TalliedDecision,
}

/// Warnings of one processor of one kind in one entry of a run's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TalliedWarning {
    /// The processor that warned.
    pub processor_id: String,
    /// What of.
    pub kind: String,
    /// How many.
    pub count: u64,
}

/// What figures count of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunTally {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Its resource (empty without memory).
    pub resource_id: String,
    /// Its thread (empty without memory).
    pub thread_id: String,
    /// When it started, in milliseconds since the epoch.
    pub started_at: i64,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The processor and reason of the tripwire that ended it.
    pub tripwire: Option<(String, String)>,
    /// Its hook calls, in timeline order.
    pub hooks: Vec<TalliedHook>,
    /// Its warnings, in timeline order.
    pub warnings: Vec<TalliedWarning>,
}

impl RunTally {
    /// The tally of `record`.
    pub fn of(record: &RunRecord) -> RunTally {
        let mut hooks = Vec::new();
        let mut warnings = Vec::new();
        for entry in &record.timeline {
            match entry {
                TimelineEntry::Hook(call) => hooks.push(TalliedHook {
                    processor_id: call.processor_id.clone(),
                    hook: call.hook,
                    calls: u64::from(call.calls.max(1)),
                    duration_us: call.duration_us,
                    max_us: call.max_us,
                    decision: match call.decision {
                        HookDecision::Abort { .. } => TalliedDecision::Aborted,
                        HookDecision::Failed { .. } => TalliedDecision::Failed,
                        HookDecision::Skipped { .. } => TalliedDecision::Skipped,
                        HookDecision::Continue
                        | HookDecision::Replaced { .. }
                        | HookDecision::Dropped
                        | HookDecision::Observed => TalliedDecision::Passed,
                    },
                }),
                TimelineEntry::Warning(warned) => warnings.push(TalliedWarning {
                    processor_id: warned.processor_id.clone(),
                    kind: warned.warning.kind.clone(),
                    count: u64::from(warned.count),
                }),
                TimelineEntry::Model(_) | TimelineEntry::Tool(_) => {}
            }
        }
        let tripwire = match (record.outcome, &record.tripwire) {
            (RunOutcome::Tripwire, Some(tripwire)) => {
                Some((tripwire.processor_id.clone(), tripwire.reason.clone()))
            }
            _ => None,
        };
        RunTally {
            run_id: record.run_id.clone(),
            agent_id: record.agent_id.clone(),
            resource_id: record.resource_id.clone(),
            thread_id: record.thread_id.clone(),
            started_at: record.started_at,
            outcome: record.outcome,
            tripwire,
            hooks,
            warnings,
        }
    }

    /// Whether a hook call of `processor_id` is among its calls.
    pub fn has_processor(&self, processor_id: &str) -> bool {
        self.hooks.iter().any(|hook| hook.processor_id == processor_id)
    }
}

impl TalliedHook {
    /// A call's mean time, in microseconds, and how many calls it stands for.
    pub(super) fn sample(&self) -> (u64, u64) {
        (self.duration_us / self.calls, self.calls)
    }
}
