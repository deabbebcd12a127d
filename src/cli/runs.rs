//! `agentwire runs` and `agentwire runs show RUN_ID`: the records of runs (`RunService`),
//! printed for a terminal — the list one run per line, a run as its timeline.

use std::fmt::Write as _;

use clap::{Args, Subcommand};

use crate::server::pb;
use crate::server::pb::run_service_client::RunServiceClient;
use crate::server::pb::timeline_entry::Entry;

/// `agentwire runs show`.
#[derive(Debug, Subcommand)]
pub(super) enum RunsCommand {
    /// One run's record: how it ended, and each hook, model and tool call with its time.
    Show {
        /// The run (`run_id` of its result or chunks).
        run_id: String,
    },
}

/// The filters of `agentwire runs`.
#[derive(Debug, Args)]
pub(super) struct RunsList {
    /// Only this agent's runs.
    #[arg(long, default_value = "")]
    agent: String,
    /// Only this resource's runs (required with a key that is not an admin key).
    #[arg(long, default_value = "")]
    resource: String,
    /// Only this thread's runs (with --resource).
    #[arg(long, default_value = "")]
    thread: String,
    /// Only runs that ended so: finished, tripwire, error, cancelled, timed-out.
    #[arg(long, default_value = "")]
    outcome: String,
    /// Only runs with a hook call of this processor.
    #[arg(long, default_value = "")]
    processor: String,
    /// How many, newest first.
    #[arg(long, default_value_t = 20)]
    limit: u32,
}

/// Lists runs, or shows one.
pub(super) async fn runs(
    addr: &str,
    key: Option<&str>,
    show: Option<RunsCommand>,
    list: RunsList,
) -> Result<String, String> {
    let mut client =
        RunServiceClient::new(crate::server::connect(addr).await.map_err(|error| error.to_string())?);
    let status = |status: tonic::Status| status.message().to_owned();
    match show {
        Some(RunsCommand::Show { run_id }) => {
            let request = super::keyed(pb::GetRunRequest { run_id }, key)?;
            Ok(render_run(&client.get_run(request).await.map_err(status)?.into_inner()))
        }
        None => {
            let request = pb::ListRunsRequest {
                agent_id: list.agent,
                resource_id: list.resource,
                thread_id: list.thread,
                outcome: list.outcome,
                processor_id: list.processor,
                page_size: list.limit,
                ..Default::default()
            };
            let page = client.list_runs(super::keyed(request, key)?).await.map_err(status)?.into_inner();
            Ok(render_list(&page.runs))
        }
    }
}

/// Milliseconds since the epoch as UTC, `2026-12-02 04:05:06.789`.
fn utc(millis: i64) -> String {
    let t = crate::domain::UtcTime::of_millis(millis);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}",
        t.year, t.month, t.day, t.hour, t.minute, t.second, t.millisecond
    )
}

/// A duration in microseconds, as a person reads it.
fn micros(us: u64) -> String {
    match us {
        0..1_000 => format!("{us} µs"),
        1_000..1_000_000 => format!("{:.1} ms", us as f64 / 1e3),
        _ => format!("{:.2} s", us as f64 / 1e6),
    }
}

/// What ended a run, in a few words.
fn ending(run: &pb::RunRecord) -> String {
    if let Some(tripwire) = &run.tripwire {
        return format!("{}: {}", tripwire.processor_id, tripwire.reason);
    }
    if let Some(error) = &run.error {
        return error.message.clone();
    }
    String::new()
}

/// How long a run took, from its start to its end.
fn took(run: &pb::RunRecord) -> String {
    micros(u64::try_from(run.ended_at - run.started_at).unwrap_or(0) * 1000)
}

fn render_list(runs: &[pb::RunRecord]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<23}  {:<36}  {:<16}  {:<10}  {:>9}  ENDED BY",
        "STARTED (UTC)", "RUN", "AGENT", "OUTCOME", "TOOK"
    );
    for run in runs {
        let took = took(run);
        let _ = writeln!(
            out,
            "{:<23}  {:<36}  {:<16}  {:<10}  {took:>9}  {}",
            utc(run.started_at),
            run.run_id,
            run.agent_id,
            run.outcome,
            ending(run)
        );
    }
    out
}

fn render_run(run: &pb::RunRecord) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "run       {}", run.run_id);
    let _ = writeln!(out, "agent     {}", run.agent_id);
    if !run.resource_id.is_empty() {
        let _ = writeln!(out, "memory    resource {} · thread {}", run.resource_id, run.thread_id);
    }
    if !run.key_name.is_empty() {
        let _ = writeln!(out, "key       {}", run.key_name);
    }
    let took = took(run);
    let _ = writeln!(out, "started   {} UTC · took {took}", utc(run.started_at));
    let _ = writeln!(out, "outcome   {} (finish reason {})", run.outcome, run.finish_reason);
    if let Some(tripwire) = &run.tripwire {
        let _ = writeln!(out, "tripwire  {} — {}", tripwire.processor_id, tripwire.reason);
    }
    if let Some(error) = &run.error {
        let _ = writeln!(out, "error     {} ({}, {})", error.message, error.source, error.origin);
    }
    if let Some(usage) = &run.usage {
        let _ = writeln!(out, "tokens    {} in · {} out", usage.input_tokens, usage.output_tokens);
    }
    let _ = writeln!(
        out,
        "\n{:>10}  {:<6}  {:<24}  {:<20}  {:<9}  {:>9}  DETAIL",
        "AT", "STEP", "WHO", "WHAT", "DECISION", "TOOK"
    );
    for entry in &run.timeline {
        let (step, who, what, decision, detail) = match &entry.entry {
            Some(Entry::Hook(call)) => {
                let step = call.step.map_or("–".to_owned(), |step| step.to_string());
                let mut detail = call.reason.clone();
                if call.calls > 1 {
                    detail = format!("{} calls, longest {} {detail}", call.calls, micros(call.max_us));
                }
                if !call.instance_id.is_empty() {
                    detail = format!("instance {} {detail}", call.instance_id);
                }
                if call.retry {
                    detail.push_str(" (asks for a retry)");
                }
                if let Some(metadata) = call.metadata.clone().map(crate::server::value::from_proto)
                    && !metadata.is_null()
                {
                    let _ = write!(detail, " {metadata}");
                }
                (step, call.processor_id.as_str(), call.hook.as_str(), call.decision.as_str(), detail)
            }
            Some(Entry::Model(call)) => {
                let usage =
                    call.usage.as_ref().map_or((0, 0), |usage| (usage.input_tokens, usage.output_tokens));
                let mut detail = format!("{} in · {} out", usage.0, usage.1);
                if call.first_token_us > 0 {
                    detail = format!("first token {} · {detail}", micros(call.first_token_us));
                }
                if call.from_cache {
                    detail.push_str(" · from a processLLMRequest response");
                }
                let decision = if call.error.is_empty() { "answered" } else { "rejected" };
                if !call.error.is_empty() {
                    detail = format!("{detail} · {}", call.error);
                }
                (call.step.to_string(), call.model.as_str(), "model call", decision, detail)
            }
            Some(Entry::Tool(call)) => {
                let decision = if call.error.is_empty() { "returned" } else { "failed" };
                (call.step.to_string(), call.name.as_str(), "tool call", decision, call.error.clone())
            }
            Some(Entry::Warning(warned)) => {
                let step = warned.step.map_or("–".to_owned(), |step| step.to_string());
                let mut detail = format!("{}: {}", warned.kind, warned.message);
                if warned.count > 1 {
                    detail = format!("{} warnings, the first: {detail}", warned.count);
                }
                (step, warned.processor_id.as_str(), warned.hook.as_str(), "warned", detail)
            }
            None => continue,
        };
        let at = format!("+{:.2} ms", entry.at_us as f64 / 1e3);
        let took = match &entry.entry {
            Some(Entry::Warning(_)) => String::new(),
            _ => micros(entry.duration_us),
        };
        let line = format!(
            "{at:>10}  {step:<6}  {who:<24}  {what:<20}  {decision:<9}  {took:>9}  {}",
            detail.trim()
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    if let Some(content) = &run.content {
        write_content(&mut out, content);
    }
    out
}

/// What the model saw and the client got, for an agent that keeps it.
fn write_content(out: &mut String, content: &pb::RunContent) {
    for prompt in &content.prompts {
        let _ = writeln!(out, "\nprompt of step {}", prompt.step);
        for message in &prompt.messages {
            let text: Vec<String> = message.parts.iter().map(part_text).collect();
            let _ =
                writeln!(out, "  {:<9}  {}", message.role, text.join(" ").replace('\n', "\n             "));
        }
    }
    let answer: String = content
        .chunks
        .iter()
        .filter_map(|chunk| match &chunk.payload {
            Some(pb::chunk::Payload::TextDelta(delta)) => Some(delta.text.as_str()),
            _ => None,
        })
        .collect();
    let _ = writeln!(out, "\nthe client got\n  {answer}");
    if content.truncated {
        let _ = writeln!(out, "  (truncated: more was sent than a record keeps)");
    }
}

/// A part as a line of text.
fn part_text(part: &pb::Part) -> String {
    use pb::part::Part as Kind;
    match &part.part {
        Some(Kind::Text(text)) => text.text.clone(),
        Some(Kind::Reasoning(reasoning)) => format!("(reasoning) {}", reasoning.text),
        Some(Kind::ToolCall(call)) => format!("→ {}", call.tool_name),
        Some(Kind::ToolResult(result)) => format!("← {}", result.tool_name),
        Some(Kind::File(file)) => format!("(file {})", file.media_type),
        Some(Kind::Data(data)) => format!("({})", data.r#type),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Times print as UTC with milliseconds, durations in the unit a person reads them in.
    #[test]
    fn times_and_durations_print_for_people() {
        assert_eq!(utc(1_796_180_706_789), "2026-12-02 03:05:06.789");
        assert_eq!(
            (micros(999), micros(1_500), micros(2_500_000)),
            ("999 µs".into(), "1.5 ms".into(), "2.50 s".into())
        );
    }
}
