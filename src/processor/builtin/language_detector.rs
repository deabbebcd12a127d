//! `language-detector`: detects the language of the input (whatlang: trigram models, offline,
//! 69 languages) and blocks or warns when it is not one of `allowed`. Texts too short or too
//! ambiguous to tell are let through (a detector guessing on "ok" would block at random).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;
use whatlang::Lang;

use super::BlockOrWarn;
use crate::domain::{Hook, HookSet, Warning};
use crate::processor::{Abort, BuildError, HookError, InputArgs, InputOutcome, Processor, parse_options};

pub(super) const KIND: &str = "language-detector";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// ISO 639-3 codes (`eng`, `deu`, `fra`, …).
    allowed: Vec<String>,
    #[serde(default)]
    strategy: BlockOrWarn,
    /// Below this confidence (0 to 1) nothing is decided. Default 0.5.
    #[serde(default = "default_min_confidence")]
    min_confidence: f64,
}

fn default_min_confidence() -> f64 {
    0.5
}

/// Detects the input's language.
pub(super) struct LanguageDetector {
    id: String,
    allowed: Vec<Lang>,
    strategy: BlockOrWarn,
    min_confidence: f64,
}

impl LanguageDetector {
    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        if options.allowed.is_empty() {
            return Err("`allowed` must name at least one language (ISO 639-3, e.g. \"eng\")"
                .to_owned()
                .into());
        }
        let mut allowed = Vec::with_capacity(options.allowed.len());
        for (index, code) in options.allowed.iter().enumerate() {
            let lang = Lang::from_code(code).ok_or_else(|| {
                format!("`allowed[{index}]`: unknown language code `{code}` (ISO 639-3, e.g. \"eng\")")
            })?;
            allowed.push(lang);
        }
        if !(0.0..=1.0).contains(&options.min_confidence) {
            return Err("`min_confidence` must be between 0 and 1".to_owned().into());
        }
        Ok(Arc::new(LanguageDetector {
            id: id.to_owned(),
            allowed,
            strategy: options.strategy,
            min_confidence: options.min_confidence,
        }))
    }
}

#[async_trait::async_trait]
impl Processor for LanguageDetector {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInput])
    }

    async fn process_input(&self, mut args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        let text: String = super::own_input(&args.messages, args.message_list)
            .map(|message| message.text())
            .collect::<Vec<_>>()
            .join("\n");
        let Some(info) = whatlang::detect(&text) else { return Ok(InputOutcome::Unchanged) };
        if info.confidence() < self.min_confidence || self.allowed.contains(&info.lang()) {
            return Ok(InputOutcome::Unchanged);
        }
        let details = json!({
            "language": info.lang().code(),
            "name": info.lang().eng_name(),
            "confidence": info.confidence(),
            "allowed": self.allowed.iter().map(|lang| lang.code()).collect::<Vec<_>>(),
        });
        match self.strategy {
            BlockOrWarn::Block => {
                let reason = format!("Input language {} is not allowed", info.lang().eng_name());
                Err(Abort::new(reason).metadata(details).into())
            }
            BlockOrWarn::Warn => {
                let message = format!("Input language {} is not among those allowed", info.lang().eng_name());
                args.ctx.warn(Warning::new("language", message, details));
                Ok(InputOutcome::Unchanged)
            }
        }
    }
}
