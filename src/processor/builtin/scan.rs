//! What the scanning processors (`pii-detector`, `regex-filter`) share: findings in a text, what
//! to do about them (block, warn, redact by mask, hash or placeholder), and redaction of a
//! stream that holds back only the tail that could still grow into a match.

use regex_automata::dfa::{Automaton, dense};
use regex_automata::{Anchored, Input};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// One match in a text, by byte range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Finding {
    pub(super) start: usize,
    pub(super) end: usize,
    /// What was found (`email`, `credit-card`, a pattern's name).
    pub(super) kind: String,
}

/// Collects the matches of several patterns tried in turn: a match overlapping one already
/// taken is dropped.
#[derive(Debug, Default)]
pub(super) struct Findings(Vec<Finding>);

impl Findings {
    /// Takes `found` as a `kind`, unless it overlaps an earlier finding.
    pub(super) fn offer(&mut self, found: regex::Match<'_>, kind: &str) {
        if !self.0.iter().any(|taken| found.start() < taken.end && taken.start < found.end()) {
            self.0.push(Finding { start: found.start(), end: found.end(), kind: kind.to_owned() });
        }
    }

    /// The findings, in text order.
    pub(super) fn sorted(mut self) -> Vec<Finding> {
        self.0.sort_by_key(|finding| finding.start);
        self.0
    }
}

/// Finds matches, and says how much of a text's end might still become one.
pub(super) trait Scanner: Send + Sync {
    /// Every match, in order, not overlapping.
    fn findings(&self, text: &str) -> Vec<Finding>;

    /// How many bytes at the end of `text`, from `from` on (what comes before is settled
    /// context), could be the start of a match that later text completes (a char boundary).
    fn open_tail(&self, text: &str, from: usize) -> usize;

    /// How many bytes of a stream's settled text its findings may depend on before a match
    /// (context words, a word boundary): kept and scanned again with each delta (0: none).
    fn context_bytes(&self) -> usize {
        0
    }
}

/// What to do with a finding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Strategy {
    /// Abort the run (a tripwire naming what was found, never the text itself).
    Block,
    /// Let it through and report it (a transient `data-*` chunk).
    Warn,
    /// Replace it.
    #[default]
    Redact,
}

/// How a redacted finding reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Redaction {
    /// `[EMAIL]`.
    #[default]
    Placeholder,
    /// One `*` per character.
    Mask,
    /// `[EMAIL:3f2a9c1b]`: the same value always reads the same, without revealing it.
    Hash,
}

impl Redaction {
    fn apply(self, kind: &str, value: &str) -> String {
        match self {
            Redaction::Placeholder => format!("[{}]", kind.to_uppercase()),
            Redaction::Mask => "*".repeat(value.chars().count()),
            Redaction::Hash => {
                let digest = Sha256::digest(value.as_bytes());
                let short: String = digest.iter().take(4).map(|byte| format!("{byte:02x}")).collect();
                format!("[{}:{short}]", kind.to_uppercase())
            }
        }
    }
}

/// `text` with its findings redacted.
pub(super) fn redact(text: &str, findings: &[Finding], redaction: Redaction) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for finding in findings {
        out.push_str(&text[at..finding.start]);
        out.push_str(&redaction.apply(&finding.kind, &text[finding.start..finding.end]));
        at = finding.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The kinds found, once each, in order.
pub(super) fn kinds(findings: &[Finding]) -> Vec<String> {
    let mut kinds = Vec::new();
    add_kinds(&mut kinds, findings);
    kinds
}

/// Adds the kinds of `findings` not yet in `kinds`.
pub(super) fn add_kinds(kinds: &mut Vec<String>, findings: &[Finding]) {
    for finding in findings {
        if !kinds.contains(&finding.kind) {
            kinds.push(finding.kind.clone());
        }
    }
}

/// True when a match of the anchored `dfa` starting at `start` could still be completed by text
/// after `text`. A quit state (a Unicode word boundary beyond ASCII, which the DFA does not
/// decide) counts as open.
pub(super) fn open_at(dfa: &dense::DFA<Vec<u32>>, text: &str, start: usize) -> bool {
    let input = Input::new(text).range(start..).anchored(Anchored::Yes);
    let Ok(mut state) = dfa.start_state_forward(&input) else { return true };
    for &byte in &text.as_bytes()[start..] {
        state = dfa.next_state(state, byte);
        if dfa.is_dead_state(state) {
            return false;
        }
        if dfa.is_quit_state(state) {
            return true;
        }
    }
    true
}

/// The bytes at the end of `text` from the earliest start, from `from` on and among its last
/// `max_bytes`, at which `open` says a match could still be completed (0: none).
pub(super) fn open_tail_within(
    text: &str,
    from: usize,
    max_bytes: usize,
    open: impl Fn(usize) -> bool,
) -> usize {
    let earliest = text.len().saturating_sub(max_bytes).max(from);
    (earliest..text.len())
        .filter(|start| text.is_char_boundary(*start))
        .find(|start| open(*start))
        .map_or(0, |start| text.len() - start)
}

/// A stream's text as it passes: what may go out now, and what waits for more.
pub(super) struct Passage {
    /// Text that is final (findings in it are complete).
    pub(super) settled: String,
    /// Its findings.
    pub(super) findings: Vec<Finding>,
}

/// The text kept in the run's `state` under `key` for stream `id`.
fn kept<'a>(state: &'a Map<String, Value>, key: &str, id: &str) -> &'a str {
    state.get(key).and_then(|kept| kept.get(id)).and_then(Value::as_str).unwrap_or_default()
}

/// Keeps `text` for stream `id` under `key`, in the string already kept there when there is one
/// (called for every delta: the map, its key and the string are made once a stream).
fn keep(state: &mut Map<String, Value>, key: &str, id: &str, text: &str) {
    if !state.contains_key(key) {
        state.insert(key.to_owned(), json!({}));
    }
    let Some(Value::Object(kept)) = state.get_mut(key) else { return };
    match kept.get_mut(id) {
        Some(Value::String(kept)) => {
            kept.clear();
            kept.push_str(text);
        }
        _ => {
            kept.insert(id.to_owned(), Value::String(text.to_owned()));
        }
    }
}

/// The end of settled `text` kept as context: its last `bytes`, from just after a character that
/// is not part of a word (so that a word boundary reads there as in the whole text), or all of it
/// when shorter.
fn context_of(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut start = text.len() - bytes;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    match text[start..].char_indices().find(|(_, c)| !c.is_alphanumeric() && *c != '_') {
        Some((at, c)) => &text[start + at + c.len_utf8()..],
        None => "",
    }
}

/// The `findings` of a text between its first `base` bytes (context) and `end`, counted from
/// `base`.
fn findings_after(findings: Vec<Finding>, base: usize, end: usize) -> Vec<Finding> {
    findings
        .into_iter()
        .filter(|finding| finding.start >= base && finding.end <= end)
        .map(|finding| Finding { start: finding.start - base, end: finding.end - base, kind: finding.kind })
        .collect()
}

/// Takes a text delta of stream `id`, with the text held back before it and the context before
/// that (kept in the run's `state`); returns what is settled and keeps the rest held.
pub(super) fn pass(scanner: &dyn Scanner, state: &mut Map<String, Value>, id: &str, delta: &str) -> Passage {
    let (context, held) = (kept(state, "context", id), kept(state, "held", id));
    let base = context.len();
    let mut pending = String::with_capacity(base + held.len() + delta.len());
    pending.extend([context, held, delta]);
    let mut cut = (pending.len() - scanner.open_tail(&pending, base)).max(base);
    // A match reaching into the open tail may still grow: hold it whole.
    let findings = scanner.findings(&pending);
    if let Some(open) = findings.iter().find(|finding| finding.start >= base && finding.end > cut) {
        cut = cut.min(open.start);
    }
    let settled = findings_after(findings, base, cut);
    keep(state, "held", id, &pending[cut..]);
    keep(state, "context", id, context_of(&pending[..cut], scanner.context_bytes()));
    Passage { settled: pending[base..cut].to_owned(), findings: settled }
}

/// Everything still held, by stream id, with its findings; the state forgets the streams.
pub(super) fn release(scanner: &dyn Scanner, state: &mut Map<String, Value>) -> Vec<(String, Passage)> {
    let contexts = state.remove("context");
    let Some(Value::Object(held)) = state.remove("held") else { return Vec::new() };
    held.into_iter()
        .filter_map(|(id, text)| {
            // A stream whose text all settled keeps an empty string.
            let text = text.as_str().filter(|text| !text.is_empty())?;
            let context = contexts
                .as_ref()
                .and_then(|contexts| contexts.get(&id))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let whole = format!("{context}{text}");
            let findings = findings_after(scanner.findings(&whole), context.len(), whole.len());
            Some((id, Passage { settled: text.to_owned(), findings }))
        })
        .collect()
}

/// The stream-safety property every [`Scanner`] must have: whatever way a text is split into
/// deltas, what goes out, concatenated, is the whole text redacted at once. Tests call it with
/// many random splits (1-character deltas included).
#[cfg(test)]
pub(super) fn assert_stream_safe(scanner: &dyn Scanner, text: &str, seeds: std::ops::Range<u64>) {
    let whole = redact(text, &scanner.findings(text), Redaction::Placeholder);
    for seed in seeds {
        let mut state = Map::new();
        let mut out = String::new();
        let mut random = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut at = 0;
        while at < text.len() {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            // Mostly 1–6 characters, now and then a long one.
            let chars = if random % 10 == 0 { 1 + (random >> 8) % 40 } else { 1 + (random >> 8) % 6 };
            let mut end = at;
            for _ in 0..chars {
                end += text[end..].chars().next().map_or(0, char::len_utf8);
            }
            let passage = pass(scanner, &mut state, "t", &text[at..end]);
            out.push_str(&redact(&passage.settled, &passage.findings, Redaction::Placeholder));
            at = end;
        }
        for (_, held) in release(scanner, &mut state) {
            out.push_str(&redact(&held.settled, &held.findings, Redaction::Placeholder));
        }
        assert_eq!(out, whole, "split with seed {seed} of {text:?}");
    }
}
