//! What every hook receives besides its own arguments: the run it serves, the processor's own
//! `state`, the retry count, a writer for custom `data-*` chunks, `warn` and `abort`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value};

use crate::domain::{DataChunk, RunInfo, Warning};

/// The context of one hook call.
#[derive(Debug)]
pub struct HookContext<'a> {
    /// The run.
    pub run: &'a RunInfo,
    /// This processor's state for this run, shared by all its hooks and steps. Starts empty.
    pub state: &'a mut Map<String, Value>,
    /// How many consecutive retries processors have triggered in this run (from 0).
    pub retry_count: u32,
    emitted: &'a mut Vec<DataChunk>,
    skipped: &'a mut Vec<SkippedProcessor>,
    /// Set by a hook's default body, when the hook check (`hook_check.rs`) is asking.
    defaulted: Option<&'a AtomicBool>,
    /// What the call tells the run's record (the remote instance that answered, a skip).
    note: Option<&'a CallNote>,
}

/// What one hook call tells the run's record besides its outcome: which remote instance
/// answered, why the processor was skipped, what it warned of. The runtime reads it once the
/// call returns.
#[derive(Debug, Default)]
pub struct CallNote {
    noted: Mutex<CallNoted>,
    /// Set when something was noted since the last take: most calls note nothing, and their
    /// take then does not lock.
    written: AtomicBool,
}

/// What a [`CallNote`] holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CallNoted {
    /// The remote instance that answered.
    pub instance_id: Option<String>,
    /// Why the processor did not take part (`unavailable`, `timeout`, `disconnected`).
    pub skipped: Option<String>,
    /// The call was sent to an observer, not awaited.
    pub observed: bool,
    /// What the call warned of, in order.
    pub warnings: Vec<Warning>,
}

impl CallNote {
    /// What was noted since the last take, leaving it empty for the next call.
    pub fn take(&self) -> CallNoted {
        if !self.written.swap(false, Ordering::Acquire) {
            return CallNoted::default();
        }
        std::mem::take(&mut *self.noted.lock().expect("call note lock"))
    }

    fn update(&self, update: impl FnOnce(&mut CallNoted)) {
        update(&mut self.noted.lock().expect("call note lock"));
        self.written.store(true, Ordering::Release);
    }
}

/// A processor that did not take part in a hook call (an unavailable remote processor under the
/// `open` failure policy). Listed in the run's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedProcessor {
    /// The processor.
    pub processor_id: String,
    /// The hook it missed.
    pub hook: String,
    /// Why: `unavailable`, `timeout`, `disconnected`.
    pub cause: String,
}

impl<'a> HookContext<'a> {
    /// A context for one call. The runtime makes these; tests of processors may too.
    pub fn new(
        run: &'a RunInfo,
        state: &'a mut Map<String, Value>,
        retry_count: u32,
        emitted: &'a mut Vec<DataChunk>,
        skipped: &'a mut Vec<SkippedProcessor>,
    ) -> HookContext<'a> {
        HookContext { run, state, retry_count, emitted, skipped, defaulted: None, note: None }
    }

    /// The context, telling `note` what the call notes for the run's record.
    pub fn noting(mut self, note: &'a CallNote) -> HookContext<'a> {
        self.note = Some(note);
        self
    }

    /// A shorter-lived context over the same run, state and outputs, for calling another hook
    /// method from inside one.
    pub fn reborrow(&mut self) -> HookContext<'_> {
        HookContext {
            run: self.run,
            state: self.state,
            retry_count: self.retry_count,
            emitted: self.emitted,
            skipped: self.skipped,
            defaulted: self.defaulted,
            note: self.note,
        }
    }

    /// A context that records whether a hook's default body ran, for the hook check.
    pub(super) fn probing(
        run: &'a RunInfo,
        state: &'a mut Map<String, Value>,
        emitted: &'a mut Vec<DataChunk>,
        skipped: &'a mut Vec<SkippedProcessor>,
        defaulted: &'a AtomicBool,
    ) -> HookContext<'a> {
        HookContext { run, state, retry_count: 0, emitted, skipped, defaulted: Some(defaulted), note: None }
    }

    /// Says that this call took the trait's default path. Every default body calls it; a
    /// processor whose `hooks()` depends on its options calls it in the hooks its options leave
    /// out, so the registry's check (`processor::hook_check`) knows they are left out on purpose.
    pub fn note_default(&self) {
        if let Some(defaulted) = self.defaulted {
            defaulted.store(true, Ordering::Relaxed);
        }
    }

    /// Records that a processor was skipped for this call; the run's result and record list it.
    pub fn report_skipped(&mut self, skipped: SkippedProcessor) {
        if let Some(note) = self.note {
            note.update(|noted| noted.skipped = Some(skipped.cause.clone()));
        }
        self.skipped.push(skipped);
    }

    /// Records that this call went to the remote instance `instance_id` as an observer (sent,
    /// not awaited), for the run's record.
    pub fn note_observed(&self, instance_id: &str) {
        if let Some(note) = self.note {
            note.update(|noted| {
                noted.instance_id = Some(instance_id.to_owned());
                noted.observed = true;
            });
        }
    }

    /// Records which remote instance answered this call, for the run's record.
    pub fn note_instance(&self, instance_id: &str) {
        if let Some(note) = self.note {
            note.update(|noted| noted.instance_id = Some(instance_id.to_owned()));
        }
    }

    /// Streams a custom `data-*` chunk to the client (after the hook returns). Non-transient
    /// chunks emitted from output hooks are kept as parts of the step's assistant message.
    pub fn emit(&mut self, chunk: DataChunk) {
        self.emitted.push(chunk);
    }

    /// Warns of what this call found without stopping the run: streamed to the client as a
    /// transient `data-<kind>` chunk carrying the details, and kept in the run's record with
    /// its message.
    pub fn warn(&mut self, warning: Warning) {
        self.emitted.push(DataChunk::new(warning.kind.as_str(), warning.details.clone()).transient());
        if let Some(note) = self.note {
            note.update(|noted| noted.warnings.push(warning));
        }
    }

    /// An abort with this reason: `return Err(ctx.abort("blocked"))`. Add `.retry()` or
    /// `.metadata(..)` through [`Abort`] for more.
    pub fn abort(&self, reason: impl Into<String>) -> HookError {
        HookError::Abort(Abort::new(reason))
    }
}

/// A processor's decision to stop the run (a *tripwire*).
#[derive(Debug, Clone, PartialEq)]
pub struct Abort {
    /// Human-readable reason; fed back to the model when the step is retried.
    pub reason: String,
    /// Ask for the step to be retried with the reason as feedback (only `processOutputStep`,
    /// within `max_processor_retries`).
    pub retry: bool,
    /// Structured data attached to the tripwire.
    pub metadata: Value,
}

impl Abort {
    /// An abort without retry or metadata.
    pub fn new(reason: impl Into<String>) -> Abort {
        Abort { reason: reason.into(), retry: false, metadata: Value::Null }
    }

    /// Asks for a retry.
    pub fn retry(mut self) -> Abort {
        self.retry = true;
        self
    }

    /// Attaches metadata.
    pub fn metadata(mut self, metadata: Value) -> Abort {
        self.metadata = metadata;
        self
    }
}

/// How a hook call can fail.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HookError {
    /// The processor aborted the run on purpose: a tripwire.
    #[error("aborted: {}", .0.reason)]
    Abort(Abort),
    /// The processor broke: it returned malformed data or could not do its work. The run ends
    /// with an error chunk naming the processor and the hook.
    #[error("{0}")]
    Failed(String),
}

impl From<Abort> for HookError {
    fn from(abort: Abort) -> HookError {
        HookError::Abort(abort)
    }
}
