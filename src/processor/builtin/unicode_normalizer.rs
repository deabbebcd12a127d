//! `unicode-normalizer`: cleans the input's text before anything else reads it — NFKC
//! normalisation (full-width and compatibility forms folded, so filters see `ｓｅｃｒｅｔ` as
//! `secret`), control and zero-width characters stripped, runs of whitespace collapsed.

use std::sync::Arc;

use serde::Deserialize;
use unicode_normalization::UnicodeNormalization;

use crate::domain::{Hook, HookSet};
use crate::processor::{BuildError, HookError, InputArgs, InputOutcome, Processor, parse_options};

pub(super) const KIND: &str = "unicode-normalizer";

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default = "super::yes")]
    nfkc: bool,
    #[serde(default = "super::yes")]
    strip_control: bool,
    #[serde(default = "super::yes")]
    strip_zero_width: bool,
    #[serde(default = "super::yes")]
    collapse_whitespace: bool,
}

/// Normalises input text.
pub(super) struct UnicodeNormalizer {
    id: String,
    options: Options,
}

/// Zero-width and invisible formatting characters that hide words from filters.
fn is_zero_width(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{00AD}' | '\u{180E}')
}

impl UnicodeNormalizer {
    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        Ok(Arc::new(UnicodeNormalizer { id: id.to_owned(), options }))
    }
}

/// `text` with every normalisation applied: what detectors read.
pub(super) fn fold(text: &str) -> String {
    let all = Options { nfkc: true, strip_control: true, strip_zero_width: true, collapse_whitespace: true };
    normalise(text, all)
}

fn normalise(text: &str, options: Options) -> String {
    let folded: String = if options.nfkc { text.nfkc().collect() } else { text.to_owned() };
    let kept = folded.chars().filter(|c| {
        !(options.strip_zero_width && is_zero_width(*c)
            || options.strip_control && c.is_control() && !c.is_whitespace())
    });
    if !options.collapse_whitespace {
        return kept.collect();
    }
    let mut out = String::with_capacity(folded.len());
    let mut in_space = false;
    for c in kept {
        if c.is_whitespace() {
            if !in_space {
                // Keep a line break where the run had one.
                out.push(if c == '\n' { '\n' } else { ' ' });
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out.trim().to_owned()
}

#[async_trait::async_trait]
impl Processor for UnicodeNormalizer {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInput])
    }

    async fn process_input(&self, args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        let mut messages = args.messages;
        let own = super::own_input_mut(&mut messages, args.message_list);
        let changed = super::rewrite_texts(own, |text| normalise(text, self.options));
        Ok(if changed { InputOutcome::Messages(messages) } else { InputOutcome::Unchanged })
    }
}
