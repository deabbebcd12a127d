//! `moderation`: an LLM judge scores the input and the answer against categories (hate,
//! harassment, self-harm, sexual, violence, illicit — or the config's own) and blocks or warns
//! when any score reaches `threshold`.
//!
//! On the stream it judges windows, never tokens: text deltas are held until `window_chunks`
//! arrived (or `window_ms` passed, or the step's stream ended), then one judge call sees the
//! window with the end of the text already judged as context. A flagged window never reaches the
//! client. Each verdict is reported in a transient `data-moderation` chunk.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::BlockOrWarn;
use super::judge::{Judge, JudgeOptions, Verdict};
use crate::domain::{Chunk, DataChunk, Hook, HookSet, JsonSchema, RunInfo, StreamWindow, Warning};
use crate::processor::{
    Abort, BuildError, HookContext, HookError, InputArgs, InputOutcome, OutputWindowArgs, Processor,
    ProcessorResources, parse_options,
};

pub(super) const KIND: &str = "moderation";

/// Characters of already judged answer text the judge sees before a window.
const CONTEXT_CHARS: usize = 400;

const DEFAULT_CATEGORIES: &[&str] = &["hate", "harassment", "self-harm", "sexual", "violence", "illicit"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    judge: JudgeOptions,
    #[serde(default)]
    categories: Option<Vec<String>>,
    #[serde(default = "default_threshold")]
    threshold: f64,
    #[serde(default)]
    strategy: BlockOrWarn,
    #[serde(default = "default_window_chunks")]
    window_chunks: usize,
    #[serde(default)]
    window_ms: u64,
}

fn default_threshold() -> f64 {
    0.5
}

fn default_window_chunks() -> usize {
    32
}

/// Moderates input and answers with a judge.
pub(super) struct Moderation {
    id: String,
    judge: Judge,
    categories: Vec<String>,
    threshold: f64,
    strategy: BlockOrWarn,
    window: StreamWindow,
    instructions: String,
    schema: JsonSchema,
}

impl Moderation {
    pub(super) fn from_options(
        id: &str,
        options: toml::Table,
        resources: &ProcessorResources,
    ) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        let categories = options
            .categories
            .unwrap_or_else(|| DEFAULT_CATEGORIES.iter().map(|&name| name.to_owned()).collect());
        if categories.is_empty() || categories.iter().any(String::is_empty) {
            return Err("`categories` must name at least one category, none empty".to_owned().into());
        }
        if !(0.0..=1.0).contains(&options.threshold) {
            return Err("`threshold` must be between 0 and 1".to_owned().into());
        }
        if !(1..=StreamWindow::MAX_CHUNKS).contains(&options.window_chunks) {
            return Err(format!("`window_chunks` must be between 1 and {}", StreamWindow::MAX_CHUNKS).into());
        }
        let delay = (options.window_ms > 0).then(|| Duration::from_millis(options.window_ms));
        let scores: Map<String, Value> = categories
            .iter()
            .map(|name| (name.clone(), json!({ "type": "number", "minimum": 0, "maximum": 1 })))
            .collect();
        let schema = JsonSchema::new(json!({
            "type": "object",
            "properties": {
                "scores": { "type": "object", "properties": scores, "required": categories, "additionalProperties": false },
                "reason": { "type": "string" },
            },
            "required": ["scores", "reason"],
            "additionalProperties": false,
        }))
        .map_err(|error| error.to_string())?;
        let instructions = format!(
            "You are a content moderator. Score the text for each category from 0 (absent) to 1 (certainly \
             present): {}. Give a short reason. Answer with JSON: {{\"scores\": {{<category>: <score>}}, \
             \"reason\": <text>}}.",
            categories.join(", ")
        );
        Ok(Arc::new(Moderation {
            id: id.to_owned(),
            judge: Judge::new(options.judge, &resources.models)?,
            categories,
            threshold: options.threshold,
            strategy: options.strategy,
            window: StreamWindow::new(options.window_chunks, delay),
            instructions,
            schema,
        }))
    }

    /// Judges `content` in `hook`: an abort when flagged and blocking, else a report.
    async fn moderate(&self, ctx: &mut HookContext<'_>, hook: Hook, content: &str) -> Result<(), HookError> {
        if content.trim().is_empty() {
            return Ok(());
        }
        let Some(Verdict { value, usage }) =
            self.judge.judge(ctx, "moderation", &self.instructions, content, &self.schema).await?
        else {
            return Ok(());
        };
        let flagged: Vec<&str> = self
            .categories
            .iter()
            .filter(|name| {
                value["scores"][name.as_str()].as_f64().is_some_and(|score| score >= self.threshold)
            })
            .map(String::as_str)
            .collect();
        let details = json!({
            "hook": hook.name(),
            "flagged": flagged,
            "scores": value["scores"],
            "reason": value["reason"],
            "usage": usage,
        });
        if flagged.is_empty() {
            ctx.emit(DataChunk::new("moderation", details).transient());
            return Ok(());
        }
        let reason = format!("Moderation flagged {} in {}", flagged.join(", "), hook.name());
        if self.strategy == BlockOrWarn::Block {
            return Err(Abort::new(reason).metadata(details).into());
        }
        ctx.warn(Warning::new("moderation", reason, details));
        Ok(())
    }
}

#[async_trait::async_trait]
impl Processor for Moderation {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInput, Hook::ProcessOutputStream])
    }

    async fn process_input(&self, mut args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        let text: Vec<String> =
            super::own_input(&args.messages, args.message_list).map(|message| message.text()).collect();
        self.moderate(&mut args.ctx, Hook::ProcessInput, &text.join("\n")).await?;
        Ok(InputOutcome::Unchanged)
    }

    fn stream_window(&self, _run: &RunInfo) -> Option<StreamWindow> {
        Some(self.window)
    }

    async fn process_output_window(&self, mut args: OutputWindowArgs<'_>) -> Result<Vec<Chunk>, HookError> {
        let window: String = args
            .parts
            .iter()
            .filter_map(|chunk| match chunk {
                Chunk::TextDelta { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if window.is_empty() {
            return Ok(args.parts);
        }
        let before = args.ctx.state.get("judged").and_then(Value::as_str).unwrap_or_default().to_owned();
        let content = if before.is_empty() {
            window.clone()
        } else {
            format!("(the answer so far, already checked: …{before})\n{window}")
        };
        self.moderate(&mut args.ctx, Hook::ProcessOutputStream, &content).await?;
        let judged = format!("{before}{window}");
        let tail_start = judged.char_indices().rev().nth(CONTEXT_CHARS - 1).map_or(0, |(at, _)| at);
        args.ctx.state.insert("judged".to_owned(), Value::String(judged[tail_start..].to_owned()));
        Ok(args.parts)
    }
}
