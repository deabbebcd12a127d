//! Run records on the wire: [`RunRecord`] → `pb::RunRecord`.

use super::convert::chunk_to_pb;
use super::pb;
use super::remote_convert::prompt_to_pb;
use super::value::to_proto;
use crate::domain::{HookDecision, Role, RunRecord, RunStart, RunStats, StatsBucket, TimelineEntry};

/// How much of a record goes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecordView {
    /// A list's: neither timeline nor content.
    Summary,
    /// All of it.
    Whole,
    /// All but the prompts' system messages (the agent's instructions among them), for a caller
    /// that may not read the agent's instructions.
    WithoutInstructions,
}

/// A record, as much of it as `view` shows.
pub(super) fn record_to_pb(record: RunRecord, view: RecordView) -> pb::RunRecord {
    let whole = view != RecordView::Summary;
    let withheld = view == RecordView::WithoutInstructions;
    let timeline = if whole { record.timeline.into_iter().map(entry_to_pb).collect() } else { Vec::new() };
    let content = record.content.filter(|_| whole).map(|content| {
        let mut system_withheld = false;
        let prompts = content
            .prompts
            .iter()
            .map(|prompt| pb::PromptRecord {
                step: prompt.step,
                messages: prompt
                    .messages
                    .iter()
                    .filter(|message| {
                        let hidden = withheld && message.role == Role::System;
                        system_withheld |= hidden;
                        !hidden
                    })
                    .map(prompt_to_pb)
                    .collect(),
            })
            .collect();
        pb::RunContent {
            prompts,
            chunks: content.chunks.into_iter().map(|chunk| chunk_to_pb(&record.run_id, chunk)).collect(),
            truncated: content.truncated,
            system_withheld,
        }
    });
    pb::RunRecord {
        run_id: record.run_id,
        agent_id: record.agent_id,
        thread_id: record.thread_id,
        resource_id: record.resource_id,
        key_name: record.key_name,
        started_at: record.started_at,
        ended_at: record.ended_at,
        outcome: record.outcome.as_str().to_owned(),
        finish_reason: record.finish_reason.as_str().to_owned(),
        usage: Some(record.usage.into()),
        tripwire: record.tripwire.map(Into::into),
        error: record.error.map(Into::into),
        timeline,
        content,
    }
}

/// A run that began: its ids, key and start; the rest of the record empty.
pub(super) fn start_to_pb(start: RunStart) -> pb::RunRecord {
    pb::RunRecord {
        run_id: start.run_id,
        agent_id: start.agent_id,
        thread_id: start.thread_id,
        resource_id: start.resource_id,
        key_name: start.key_name,
        started_at: start.started_at,
        ..Default::default()
    }
}

fn entry_to_pb(entry: TimelineEntry) -> pb::TimelineEntry {
    use pb::timeline_entry::Entry;
    match entry {
        TimelineEntry::Hook(call) => {
            let (decision, reason, retry, metadata) = match call.decision {
                HookDecision::Continue => ("continue", String::new(), false, None),
                HookDecision::Observed => ("observed", String::new(), false, None),
                HookDecision::Replaced { what } => ("replaced", what, false, None),
                HookDecision::Dropped => ("dropped", String::new(), false, None),
                HookDecision::Abort { reason, retry, metadata } => {
                    ("abort", reason, retry, Some(to_proto(&metadata)))
                }
                HookDecision::Failed { message } => ("failed", message, false, None),
                HookDecision::Skipped { cause } => ("skipped", cause, false, None),
            };
            pb::TimelineEntry {
                at_us: call.at_us,
                duration_us: call.duration_us,
                entry: Some(Entry::Hook(pb::HookCallEntry {
                    processor_id: call.processor_id,
                    hook: call.hook.name().to_owned(),
                    step: call.step,
                    retry_count: call.retry_count,
                    instance_id: call.instance_id.unwrap_or_default(),
                    calls: call.calls,
                    max_us: call.max_us,
                    decision: decision.to_owned(),
                    reason,
                    retry,
                    metadata,
                })),
            }
        }
        TimelineEntry::Model(call) => pb::TimelineEntry {
            at_us: call.at_us,
            duration_us: call.duration_us,
            entry: Some(Entry::Model(pb::ModelCallEntry {
                model: call.model,
                step: call.step,
                first_token_us: call.first_token_us.unwrap_or_default(),
                usage: Some(call.usage.into()),
                from_cache: call.from_cache,
                error: call.error.unwrap_or_default(),
            })),
        },
        TimelineEntry::Tool(call) => pb::TimelineEntry {
            at_us: call.at_us,
            duration_us: call.duration_us,
            entry: Some(Entry::Tool(pb::ToolCallEntry {
                name: call.name,
                step: call.step,
                error: call.error.unwrap_or_default(),
            })),
        },
        TimelineEntry::Warning(warned) => pb::TimelineEntry {
            at_us: warned.at_us,
            duration_us: 0,
            entry: Some(Entry::Warning(pb::WarningEntry {
                processor_id: warned.processor_id,
                hook: warned.hook.name().to_owned(),
                step: warned.step,
                kind: warned.warning.kind,
                message: warned.warning.message,
                details: Some(to_proto(&warned.warning.details)),
                count: warned.count,
            })),
        },
    }
}

/// Figures over runs; `complete` when every run of the window was counted.
pub(super) fn stats_to_pb(stats: RunStats, complete: bool, buckets: Vec<StatsBucket>) -> pb::RunStats {
    pb::RunStats {
        runs: stats.runs,
        outcomes: stats.outcomes.into_iter().map(|(outcome, count)| (outcome.to_owned(), count)).collect(),
        tripwires: stats
            .tripwires
            .into_iter()
            .map(|tripwire| pb::TripwireCount {
                processor_id: tripwire.processor_id,
                reason: tripwire.reason,
                count: tripwire.count,
            })
            .collect(),
        hooks: stats
            .hooks
            .into_iter()
            .map(|hook| pb::HookLatency {
                processor_id: hook.processor_id,
                hook: hook.hook.name().to_owned(),
                calls: hook.calls,
                p50_us: hook.p50_us,
                p95_us: hook.p95_us,
                p99_us: hook.p99_us,
                max_us: hook.max_us,
                aborts: hook.aborts,
                failures: hook.failures,
                skipped: hook.skipped,
            })
            .collect(),
        complete,
        buckets: buckets.into_iter().map(bucket_to_pb).collect(),
        warnings: stats
            .warnings
            .into_iter()
            .map(|warning| pb::WarningCount {
                processor_id: warning.processor_id,
                kind: warning.kind,
                count: warning.count,
            })
            .collect(),
    }
}

fn bucket_to_pb(bucket: StatsBucket) -> pb::StatsBucket {
    pb::StatsBucket {
        start: bucket.start,
        runs: bucket.runs,
        outcomes: bucket.outcomes.into_iter().map(|(outcome, count)| (outcome.to_owned(), count)).collect(),
        tripwires: bucket.tripwires.into_iter().collect(),
        latency: bucket
            .latency
            .into_iter()
            .map(|(processor, latency)| {
                let latency = pb::BucketLatency {
                    calls: latency.calls,
                    p50_us: latency.p50_us,
                    p95_us: latency.p95_us,
                };
                (processor, latency)
            })
            .collect(),
        warnings: bucket.warnings.into_iter().collect(),
    }
}
