//! The `pii-detector` evaluation: every sentence of the PII corpus through the real server, in
//! the input list (Generate) and in the output list (Stream and Generate, the answer cut into
//! deltas of several sizes), scored per entity type and per locale, with the latency it adds.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use tonic::transport::Channel;

use super::corpus::{PiiCase, Span};
use super::paired::paired;
use super::spans::found_in;
use super::tally::Tally;
use crate::server::pb;
use crate::server::pb::agent_service_client::AgentServiceClient;

/// Runs in flight at once while scoring.
const CONCURRENCY: usize = 8;

/// One way the text meets the detector.
#[derive(Debug, Clone, Copy)]
pub struct Mode {
    /// As reported.
    pub name: &'static str,
    /// The agent (its `-mask` twin redacts with `mask`).
    agent: &'static str,
    stream: bool,
    /// What the agent's model puts before the text (`mock/echo`'s `echo: `).
    prefix: &'static str,
}

/// Every mode; the first is the reference the others are compared with.
pub const MODES: [Mode; 5] = [
    Mode { name: "Generate, input list", agent: "in", stream: false, prefix: "echo: " },
    Mode { name: "Stream, output list, 1-char deltas", agent: "out-1", stream: true, prefix: "" },
    Mode { name: "Stream, output list, 3-char deltas", agent: "out-3", stream: true, prefix: "" },
    Mode { name: "Stream, output list, 1–14-char deltas", agent: "out-mixed", stream: true, prefix: "" },
    Mode { name: "Generate, output list, 16-char deltas", agent: "out-16", stream: false, prefix: "" },
];

/// The modes of a quick run: the input list, and the stream of mixed deltas.
pub(super) const QUICK_MODES: [usize; 2] = [0, 3];

/// The agents the modes use, with and without the detector.
pub(super) fn config() -> String {
    let mut config = String::from(
        "[processors.pii]\nkind = \"pii-detector\"\n\n[processors.pii-mask]\nkind = \"pii-detector\"\nredaction = \"mask\"\n",
    );
    let outputs =
        [("out-1", "[1]"), ("out-3", "[3]"), ("out-mixed", "[1, 5, 2, 9, 3, 14, 4, 7]"), ("out-16", "[16]")];
    for (processor, suffix) in [("pii", ""), ("pii-mask", "-mask")] {
        config += &format!(
            "\n[[agents]]\nid = \"in{suffix}\"\nmodel = \"mock/echo\"\ninput_processors = [\"{processor}\"]\n"
        );
        for (agent, sizes) in outputs {
            config += &format!(
                "\n[[agents]]\nid = \"{agent}{suffix}\"\nmodel = \"mock/script\"\noutput_processors = [\"{processor}\"]\nscript = [{{ repeat_input = {sizes} }}]\n"
            );
        }
    }
    config += "\n[[agents]]\nid = \"bare-in\"\nmodel = \"mock/echo\"\n";
    config += "\n[[agents]]\nid = \"bare-out-mixed\"\nmodel = \"mock/script\"\nscript = [{ repeat_input = [1, 5, 2, 9, 3, 14, 4, 7] }]\n";
    config
}

/// The figures of one mode.
#[derive(Debug, Clone, Default)]
pub struct ModeFigures {
    /// The mode's name.
    pub mode: &'static str,
    /// Sentences run.
    pub cases: usize,
    /// Over every entity type.
    pub all: Tally,
    /// Per entity type.
    pub by_kind: BTreeMap<String, Tally>,
    /// Per locale, over every entity type.
    pub by_locale: BTreeMap<String, Tally>,
    /// Sentences whose redaction differs from the reference mode's (the whole text at once).
    pub unlike_whole: usize,
}

/// A value missed, or a look-alike redacted, for the report's "what it does not catch".
#[derive(Debug, Clone)]
pub struct Miss {
    /// The entity type.
    pub kind: String,
    /// `leaked` (planted, not redacted whole) or `look-alike` (redacted, not planted as this kind).
    pub what: &'static str,
    /// The text concerned.
    pub text: String,
}

/// What the evaluation measured.
#[derive(Debug, Clone, Default)]
pub struct PiiReport {
    /// One per mode run.
    pub modes: Vec<ModeFigures>,
    /// The first misses of each kind and sort, from the reference mode.
    pub misses: Vec<Miss>,
    /// p50 of a Generate with the detector in the input list and without, per sentence.
    pub generate_p50: (Duration, Duration),
    /// p50 of a Stream (1–14-char deltas) with the detector in the output list and without.
    pub stream_p50: (Duration, Duration),
}

/// Runs `cases` in each of `modes` (indexes into [`MODES`], the reference first) and measures
/// the latency added over `latency_samples` sentences; keeps `misses` misses of each kind and sort.
pub(super) async fn evaluate(
    channel: &Channel,
    cases: &[PiiCase],
    modes: &[usize],
    latency_samples: usize,
    misses: usize,
) -> Result<PiiReport, String> {
    let mut report = PiiReport::default();
    // First, so that no sentence has been seen before it is timed.
    let samples = &cases[..latency_samples.min(cases.len())];
    report.generate_p50 = paired_p50(channel, samples, ("in", false), ("bare-in", false)).await?;
    report.stream_p50 = paired_p50(channel, samples, ("out-mixed", true), ("bare-out-mixed", true)).await?;
    let mut reference: Vec<String> = Vec::new();
    for &index in modes {
        let mode = MODES[index];
        let outputs: Vec<(String, Vec<Span>)> = futures::stream::iter(cases)
            .map(|case| redact(channel, mode, case))
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        let mut figures = ModeFigures { mode: mode.name, cases: cases.len(), ..ModeFigures::default() };
        for (case, (_, found)) in cases.iter().zip(&outputs) {
            let scored = score(case, found, reference.is_empty());
            for (kind, tally) in scored.by_kind {
                *figures.by_kind.entry(kind).or_default() += tally;
                *figures.by_locale.entry(case.locale.clone()).or_default() += tally;
                figures.all += tally;
            }
            report.misses.extend(scored.misses);
        }
        let texts: Vec<String> = outputs.into_iter().map(|(text, _)| text).collect();
        if reference.is_empty() {
            reference = texts;
        } else {
            figures.unlike_whole =
                reference.iter().zip(&texts).filter(|(whole, split)| whole != split).count();
        }
        report.modes.push(figures);
    }
    report.misses = first_misses(std::mem::take(&mut report.misses), misses);
    Ok(report)
}

/// The text that came out of `mode` for `case` (placeholders), and what it redacted.
async fn redact(channel: &Channel, mode: Mode, case: &PiiCase) -> Result<(String, Vec<Span>), String> {
    let placeholdered = ask(channel, mode.agent, mode.stream, &case.text).await?;
    let masked = ask(channel, &format!("{}-mask", mode.agent), mode.stream, &case.text).await?;
    let strip = |text: &str| text.strip_prefix(mode.prefix).map(str::to_owned);
    let (Some(placeholdered), Some(masked)) = (strip(&placeholdered), strip(&masked)) else {
        return Err(format!("{}: the answer lost its {:?} prefix", case.id, mode.prefix));
    };
    let found =
        found_in(&case.text, &masked, &placeholdered).map_err(|error| format!("{}: {error}", case.id))?;
    Ok((placeholdered, found))
}

/// One run's answer text.
async fn ask(channel: &Channel, agent: &str, stream: bool, text: &str) -> Result<String, String> {
    let mut client = AgentServiceClient::new(channel.clone());
    let request = pb::RunRequest { agent_id: agent.to_owned(), text: text.to_owned(), ..Default::default() };
    let failed = |status: tonic::Status| format!("agent {agent}: {}", status.message());
    if !stream {
        return Ok(client.generate(request).await.map_err(failed)?.into_inner().text);
    }
    let mut chunks = client.stream(request).await.map_err(failed)?.into_inner();
    let mut answer = String::new();
    while let Some(chunk) = chunks.message().await.map_err(failed)? {
        if let Some(pb::chunk::Payload::TextDelta(delta)) = chunk.payload {
            answer += &delta.text;
        }
    }
    Ok(answer)
}

/// One sentence scored.
struct Scored {
    by_kind: BTreeMap<String, Tally>,
    misses: Vec<Miss>,
}

/// Planted values caught whole, and findings right or wrong, per kind.
fn score(case: &PiiCase, found: &[Span], keep_misses: bool) -> Scored {
    let mut scored = Scored { by_kind: BTreeMap::new(), misses: Vec::new() };
    for planted in &case.spans {
        let whole = case.text[planted.start..planted.end]
            .char_indices()
            .filter(|(_, c)| !c.is_whitespace())
            .all(|(at, _)| found.iter().any(|span| (span.start..span.end).contains(&(planted.start + at))));
        let tally = scored.by_kind.entry(planted.kind.clone()).or_default();
        tally.planted += 1;
        tally.caught += u64::from(whole);
        if !whole && keep_misses {
            let text = case.text[planted.start..planted.end].to_owned();
            scored.misses.push(Miss { kind: planted.kind.clone(), what: "leaked", text });
        }
    }
    for span in found {
        let right = case
            .spans
            .iter()
            .any(|planted| planted.kind == span.kind && planted.start < span.end && span.start < planted.end);
        let tally = scored.by_kind.entry(span.kind.clone()).or_default();
        if right {
            tally.found_right += 1;
        } else {
            tally.found_wrong += 1;
            if keep_misses {
                let text = case.text[span.start..span.end].to_owned();
                scored.misses.push(Miss { kind: span.kind.clone(), what: "look-alike", text });
            }
        }
    }
    scored
}

/// At most `each` misses per kind and sort.
fn first_misses(misses: Vec<Miss>, each: usize) -> Vec<Miss> {
    let mut counts: BTreeMap<(String, &'static str), usize> = BTreeMap::new();
    misses
        .into_iter()
        .filter(|miss| {
            let count = counts.entry((miss.kind.clone(), miss.what)).or_default();
            *count += 1;
            *count <= each
        })
        .collect()
}

/// Median latency of `with` and of `without` (agent, stream) over `cases`.
async fn paired_p50(
    channel: &Channel,
    cases: &[PiiCase],
    with: (&str, bool),
    without: (&str, bool),
) -> Result<(Duration, Duration), String> {
    let texts: Vec<String> = cases.iter().map(|case| case.text.clone()).collect();
    paired(&texts, |(on, text)| async move {
        let (agent, stream) = if on { with } else { without };
        ask(channel, agent, stream, &text).await.map(|_| ())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(text: &str, spans: Vec<Span>) -> PiiCase {
        PiiCase { id: "t".into(), locale: "en_US".into(), text: text.into(), spans }
    }

    /// A value counts as caught only when redacted whole; a finding of the wrong kind is wrong.
    #[test]
    fn a_value_cut_in_half_is_a_leak_and_a_wrong_kind_a_look_alike() {
        let sentence =
            case("call +33 5 47 72 13 05 now", vec![Span { start: 5, end: 22, kind: "phone".into() }]);
        let half = score(&sentence, &[Span { start: 14, end: 22, kind: "phone".into() }], true);
        assert_eq!(half.by_kind["phone"], Tally { found_right: 1, found_wrong: 0, planted: 1, caught: 0 });
        let wrong = score(&sentence, &[Span { start: 5, end: 22, kind: "credit-card".into() }], true);
        assert_eq!(wrong.by_kind["phone"].caught, 1);
        assert_eq!(wrong.by_kind["credit-card"].found_wrong, 1);
        assert_eq!(wrong.misses[0].what, "look-alike");
    }
}
