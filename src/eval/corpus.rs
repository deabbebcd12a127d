//! The labelled corpora an evaluation reads (`tests/corpora/*.jsonl`, one case per line).

use std::path::Path;

use serde::Deserialize;

/// A planted value: its bytes in the case's text and its kind (a `pii-detector` detector).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// The detector that should find it.
    pub kind: String,
}

/// One sentence of the PII corpus.
#[derive(Debug, Clone, Deserialize)]
pub struct PiiCase {
    /// Unique in the corpus (`de_DE-0042`).
    pub id: String,
    /// Faker's locale the values and the sentence come from.
    pub locale: String,
    /// The sentence.
    pub text: String,
    /// What is planted in it; everything else must pass unredacted.
    pub spans: Vec<Span>,
}

/// Reads a JSON Lines corpus, checking every span lies on the text's character boundaries.
pub fn read_pii(path: &Path) -> Result<Vec<PiiCase>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let mut cases = Vec::new();
    for (index, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        let at = || format!("{}:{}", path.display(), index + 1);
        let case: PiiCase = serde_json::from_str(line).map_err(|error| format!("{}: {error}", at()))?;
        for span in &case.spans {
            if span.start >= span.end
                || !case.text.is_char_boundary(span.start)
                || !case.text.is_char_boundary(span.end)
                || span.end > case.text.len()
            {
                return Err(format!("{}: span {}..{} is not within the text", at(), span.start, span.end));
            }
        }
        cases.push(case);
    }
    Ok(cases)
}

/// One text of the prompt-injection corpora.
#[derive(Debug, Clone, Deserialize)]
pub struct InjectionCase {
    /// Unique in its file (`de-direct-0042`).
    pub id: String,
    /// The language (`en`, `de`, `fr`, `es`, `it`, `pt`, `zh`, `ja`, `ko`).
    pub lang: String,
    /// Where the text meets the detector: `direct` (the user's input) or `tool` (a tool's result).
    pub path: String,
    /// The sort of attack (`override`, `obfuscated-base64`, `in-the-wild`, …) or of benign text
    /// (`benign`, `benign-trigger`, …).
    pub category: String,
    /// Whether it is an injection.
    pub label: bool,
    /// The text.
    pub text: String,
    /// An attack put into a document: the attack as it was inserted (what training learns
    /// from is the windows that hold it, not the document around it).
    #[serde(default)]
    pub injected: Option<String>,
}

/// Reads a prompt-injection corpus.
pub fn read_injection(path: &Path) -> Result<Vec<InjectionCase>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let mut cases = Vec::new();
    for (index, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        let case: InjectionCase = serde_json::from_str(line)
            .map_err(|error| format!("{}:{}: {error}", path.display(), index + 1))?;
        if !matches!(case.path.as_str(), "direct" | "tool") {
            return Err(format!(
                "{}:{}: `path` is {:?}, not direct or tool",
                path.display(),
                index + 1,
                case.path
            ));
        }
        cases.push(case);
    }
    Ok(cases)
}
