//! A run's record as it goes: every hook call (through `guarded`), model call and tool call,
//! with when it started and how long it took, and the warnings of the hook calls; `conclude`
//! turns it into the [`RunRecord`] the run leaves. The continuing calls of a stream processor in
//! one step are counted in one entry, and so are its warnings of one kind, so a stream of
//! thousands of chunks leaves a short timeline.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::content::ContentLog;
use crate::domain::{
    Chunk, FinishReason, Hook, PromptMessage, RunFailure, RunInfo, RunStart, Tripwire, Usage,
};
use crate::domain::{
    HookCallRecord, HookDecision, ModelCallRecord, RunOutcome, RunRecord, TimelineEntry, ToolCallRecord,
    Warning, WarningRecord, now_millis,
};
use crate::processor::{CallNote, CallNoted};
use crate::telemetry::metrics::{self, Histogram};

/// Entries looked back through for the entry a continuing stream call adds to.
const MERGE_WINDOW: usize = 16;
/// Timeline entries room is made for when a run starts: a run of a few processors and one step
/// records about a dozen, so its timeline is allocated once rather than grown entry by entry.
const TIMELINE_ROOM: usize = 16;

/// One run's recording.
#[derive(Debug)]
pub(super) struct Recorder {
    started: Instant,
    started_at: i64,
    /// What the hook call in progress notes (its remote instance, a skip).
    pub(super) note: CallNote,
    recording: Mutex<Recording>,
    /// What the model saw and the client got, when the agent keeps it.
    content: Option<Mutex<ContentLog>>,
}

#[derive(Debug, Default)]
struct Recording {
    step: Option<u32>,
    retry_count: u32,
    timeline: Vec<TimelineEntry>,
    /// The hook duration histogram of each processor and hook this run called, looked up in
    /// the registry once per run rather than on every call (a stream hook runs on every chunk).
    hook_series: Vec<(String, Hook, Arc<Histogram>)>,
}

impl Recording {
    /// Records `elapsed` in the duration histogram of `processor_id`'s `hook`.
    fn hook_took(&mut self, processor_id: &str, hook: Hook, elapsed: Duration) {
        let known = self.hook_series.iter().find(|(id, known, _)| *known == hook && id == processor_id);
        let histogram = match known {
            Some((_, _, histogram)) => histogram,
            None => {
                let labels = [("processor", processor_id), ("hook", hook.name())];
                let histogram = metrics::global().histogram(&metrics::HOOK_DURATION, &labels);
                self.hook_series.push((processor_id.to_owned(), hook, histogram));
                &self.hook_series[self.hook_series.len() - 1].2
            }
        };
        histogram.observe(elapsed);
    }

    /// A warning of a call at `at_us`, counted with an earlier one of the same processor, hook,
    /// step and kind.
    fn warned(&mut self, processor_id: &str, hook: Hook, step: Option<u32>, at_us: u64, warning: Warning) {
        let same = self.timeline.iter_mut().rev().take(MERGE_WINDOW).find_map(|entry| match entry {
            TimelineEntry::Warning(warned)
                if warned.hook == hook
                    && warned.step == step
                    && warned.processor_id == processor_id
                    && warned.warning.kind == warning.kind =>
            {
                Some(warned)
            }
            _ => None,
        });
        match same {
            Some(warned) => warned.count += 1,
            None => self.timeline.push(TimelineEntry::Warning(WarningRecord {
                processor_id: processor_id.to_owned(),
                hook,
                step,
                at_us,
                count: 1,
                warning,
            })),
        }
    }
}

impl Recorder {
    /// A run's recorder; `content`: keep prompts and delivered chunks too.
    pub(super) fn new(content: bool) -> Recorder {
        Recorder {
            started: Instant::now(),
            started_at: now_millis(),
            note: CallNote::default(),
            recording: Mutex::new(Recording {
                timeline: Vec::with_capacity(TIMELINE_ROOM),
                ..Recording::default()
            }),
            content: content.then(Mutex::default),
        }
    }

    fn content(&self) -> Option<std::sync::MutexGuard<'_, ContentLog>> {
        self.content.as_ref().map(|log| log.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// The prompt of the model call of `step`, for an agent that keeps content.
    pub(super) fn prompt(&self, step: u32, messages: &[PromptMessage]) {
        if let Some(mut log) = self.content() {
            log.prompt(step, messages);
        }
    }

    /// A chunk the client got, for an agent that keeps content.
    pub(super) fn delivered(&self, chunk: &Chunk) {
        if let Some(mut log) = self.content() {
            log.chunk(chunk);
        }
    }

    fn recording(&self) -> std::sync::MutexGuard<'_, Recording> {
        self.recording.lock().expect("recording lock")
    }

    fn at_us(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.started).as_micros()).unwrap_or(u64::MAX)
    }

    /// The step the next calls run in (`None` outside the steps) and the retry count.
    pub(super) fn at_step(&self, step: Option<u32>, retry_count: u32) {
        let mut recording = self.recording();
        recording.step = step;
        recording.retry_count = retry_count;
    }

    /// A hook call of `processor_id` that started at `started` and took `elapsed`; `failure` is
    /// its error, if it had one (the note says the rest).
    pub(super) fn hook(
        &self,
        processor_id: &str,
        hook: Hook,
        started: Instant,
        elapsed: Duration,
        decision: Option<HookDecision>,
    ) {
        let CallNoted { instance_id, skipped, observed, warnings } = self.note.take();
        let decision = decision.unwrap_or(match (skipped, observed) {
            (Some(cause), _) => HookDecision::Skipped { cause },
            (None, true) => HookDecision::Observed,
            (None, false) => HookDecision::Continue,
        });
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let at_us = self.at_us(started);
        let mut recording = self.recording();
        recording.hook_took(processor_id, hook, elapsed);
        let (step, retry_count) = (recording.step, recording.retry_count);
        for warning in warnings {
            recording.warned(processor_id, hook, step, at_us, warning);
        }
        let mergeable = matches!(
            decision,
            HookDecision::Continue | HookDecision::Replaced { .. } | HookDecision::Dropped
        );
        if hook == Hook::ProcessOutputStream && mergeable {
            let same = recording.timeline.iter_mut().rev().take(MERGE_WINDOW).find_map(|entry| match entry {
                TimelineEntry::Hook(call)
                    if call.hook == hook
                        && call.step == step
                        && call.processor_id == processor_id
                        && call.instance_id == instance_id
                        && call.decision == decision =>
                {
                    Some(call)
                }
                _ => None,
            });
            if let Some(call) = same {
                call.calls += 1;
                call.duration_us += micros;
                call.max_us = call.max_us.max(micros);
                return;
            }
        }
        recording.timeline.push(TimelineEntry::Hook(HookCallRecord {
            processor_id: processor_id.to_owned(),
            hook,
            step,
            retry_count,
            instance_id,
            at_us,
            duration_us: micros,
            calls: 1,
            max_us: micros,
            decision,
        }));
    }

    /// A model call of `model` in `step`, started at `started`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn model(
        &self,
        model: &str,
        step: u32,
        started: Instant,
        first_token: Option<Instant>,
        usage: Usage,
        from_cache: bool,
        error: Option<String>,
    ) {
        let micros =
            |at: Instant| u64::try_from(at.saturating_duration_since(started).as_micros()).unwrap_or(0);
        let entry = ModelCallRecord {
            model: model.to_owned(),
            step,
            at_us: self.at_us(started),
            duration_us: micros(Instant::now()),
            first_token_us: first_token.map(micros),
            usage,
            from_cache,
            error,
        };
        self.recording().timeline.push(TimelineEntry::Model(entry));
    }

    /// A tool call of `name` in `step`, started at `started`.
    pub(super) fn tool(&self, name: &str, step: u32, started: Instant, error: Option<String>) {
        let entry = ToolCallRecord {
            name: name.to_owned(),
            step,
            at_us: self.at_us(started),
            duration_us: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            error,
        };
        self.recording().timeline.push(TimelineEntry::Tool(entry));
    }

    /// What is known of the run `info` as it begins.
    pub(super) fn start(&self, info: &RunInfo, key_name: &str) -> RunStart {
        RunStart {
            run_id: info.run_id.clone(),
            agent_id: info.agent_id.clone(),
            thread_id: info.thread_id.clone(),
            resource_id: info.resource_id.clone(),
            key_name: key_name.to_owned(),
            started_at: self.started_at,
        }
    }

    /// The record of the run `info` that ended so.
    pub(super) fn finish(&self, info: &RunInfo, key_name: &str, ended: Ended) -> RunRecord {
        let mut timeline = std::mem::take(&mut self.recording().timeline);
        timeline.sort_by_key(TimelineEntry::at_us);
        let RunStart { run_id, agent_id, thread_id, resource_id, key_name, started_at } =
            self.start(info, key_name);
        RunRecord {
            run_id,
            agent_id,
            thread_id,
            resource_id,
            key_name,
            started_at,
            ended_at: now_millis(),
            outcome: ended.outcome,
            finish_reason: ended.finish_reason,
            usage: ended.usage,
            tripwire: ended.tripwire,
            error: ended.error,
            timeline,
            content: self.content().map(|mut log| std::mem::take(&mut *log).finish()),
        }
    }
}

/// How a run ended, for its record.
pub(super) struct Ended {
    pub(super) outcome: RunOutcome,
    pub(super) finish_reason: FinishReason,
    pub(super) usage: Usage,
    pub(super) tripwire: Option<Tripwire>,
    pub(super) error: Option<RunFailure>,
}
