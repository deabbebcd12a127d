//! `token-limiter`: token budgets counted with a real tokenizer (tiktoken's encodings).
//!
//! - **Input** (`input_limit`, processLLMRequest): the final prompt of each step — after every
//!   earlier processor rewrote it, so it counts what is really sent — is trimmed to the budget by
//!   dropping the oldest *remembered* messages. A tool call and its result go together; system
//!   messages and the run's own messages (its input and its tool loop) are never dropped. When
//!   they alone exceed the budget the run ends in a tripwire instead of sending it over.
//! - **Output** (`output_limit`, processOutputStream): answer text is counted as it streams,
//!   for the whole run (`count = "cumulative"`) or per text part (`"part"`); at the limit the
//!   text is cut at the exact token (`strategy = "truncate"`) or the run trips (`"abort"`).
//!
//! Each trim and truncation is reported in a transient `data-token-limit` chunk.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use tiktoken_rs::CoreBPE;

use crate::domain::{Chunk, DataChunk, Hook, HookSet, Part, PromptMessage, Role};
use crate::processor::{
    Abort, BuildError, HookError, LlmRequestArgs, LlmRequestOutcome, OutputStreamArgs, Processor,
    parse_options,
};

pub(super) const KIND: &str = "token-limiter";

/// Every message costs this much besides its content (OpenAI's chat format: role and framing).
const MESSAGE_OVERHEAD: usize = 4;
/// An image or other file, whatever its size: the order of a typical image's cost.
const FILE_TOKENS: usize = 765;

/// tiktoken's encodings, by their names.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
enum Encoding {
    #[default]
    #[serde(rename = "o200k_base")]
    O200k,
    #[serde(rename = "cl100k_base")]
    Cl100k,
    #[serde(rename = "p50k_base")]
    P50k,
    #[serde(rename = "r50k_base")]
    R50k,
}

impl Encoding {
    fn bpe(self) -> &'static CoreBPE {
        match self {
            Encoding::O200k => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100k => tiktoken_rs::cl100k_base_singleton(),
            Encoding::P50k => tiktoken_rs::p50k_base_singleton(),
            Encoding::R50k => tiktoken_rs::r50k_base_singleton(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Strategy {
    #[default]
    Truncate,
    Abort,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Count {
    #[default]
    Cumulative,
    Part,
}

impl Count {
    fn name(self) -> &'static str {
        match self {
            Count::Cumulative => "cumulative",
            Count::Part => "part",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default)]
    encoding: Encoding,
    #[serde(default)]
    input_limit: Option<usize>,
    #[serde(default)]
    output_limit: Option<usize>,
    #[serde(default)]
    strategy: Strategy,
    #[serde(default)]
    count: Count,
}

/// Keeps prompts and answers within token budgets.
pub(super) struct TokenLimiter {
    id: String,
    bpe: &'static CoreBPE,
    input_limit: Option<usize>,
    output_limit: Option<usize>,
    strategy: Strategy,
    count: Count,
}

impl TokenLimiter {
    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        if options.input_limit.is_none() && options.output_limit.is_none() {
            return Err("set `input_limit`, `output_limit` or both (in tokens)".to_owned().into());
        }
        for (name, limit) in [("input_limit", options.input_limit), ("output_limit", options.output_limit)] {
            if limit == Some(0) {
                return Err(format!("`{name}` must be at least 1 token").into());
            }
        }
        Ok(Arc::new(TokenLimiter {
            id: id.to_owned(),
            bpe: options.encoding.bpe(),
            input_limit: options.input_limit,
            output_limit: options.output_limit,
            strategy: options.strategy,
            count: options.count,
        }))
    }

    fn tokens(&self, text: &str) -> usize {
        self.bpe.encode_ordinary(text).len()
    }

    fn message_tokens(&self, message: &PromptMessage) -> usize {
        let content: usize = message
            .parts
            .iter()
            .map(|part| match part {
                Part::Text { text } | Part::Reasoning { text } => self.tokens(text),
                Part::ToolCall(call) => self.tokens(&call.tool_name) + self.tokens(&call.args.to_string()),
                Part::ToolResult(result) => self.tokens(&result.result.to_string()),
                Part::File { .. } => FILE_TOKENS,
                Part::Data { .. } => 0,
            })
            .sum();
        MESSAGE_OVERHEAD + content
    }

    /// The first `tokens` tokens of `text` (whole characters only).
    fn prefix(&self, text: &str, tokens: usize) -> String {
        let encoded = self.bpe.encode_ordinary(text);
        let bytes = self.bpe.decode_bytes(&encoded[..tokens.min(encoded.len())]).unwrap_or_default();
        match String::from_utf8(bytes) {
            Ok(prefix) => prefix,
            Err(error) => {
                let valid = error.utf8_error().valid_up_to();
                String::from_utf8_lossy(&error.into_bytes()[..valid]).into_owned()
            }
        }
    }
}

/// The remembered messages at the start of the prompt, as groups that go together: a message
/// with tool calls takes the later messages holding their results along. Returns each group's
/// prompt indices, oldest first.
fn history_groups(prompt: &[PromptMessage], history: &[usize]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut open_calls: HashSet<&str> = HashSet::new();
    for &index in history {
        let parts = &prompt[index].parts;
        let answers_open = parts.iter().any(|part| {
            matches!(part, Part::ToolResult(result) if open_calls.contains(result.tool_call_id.as_str()))
        });
        match groups.last_mut() {
            Some(group) if answers_open => group.push(index),
            _ => {
                open_calls.clear();
                groups.push(vec![index]);
            }
        }
        for part in parts {
            if let Part::ToolCall(call) = part {
                open_calls.insert(&call.tool_call_id);
            }
        }
    }
    groups
}

#[async_trait::async_trait]
impl Processor for TokenLimiter {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        let mut hooks = Vec::new();
        if self.input_limit.is_some() {
            hooks.push(Hook::ProcessLlmRequest);
        }
        if self.output_limit.is_some() {
            hooks.push(Hook::ProcessOutputStream);
        }
        HookSet::of(&hooks)
    }

    async fn process_llm_request(
        &self,
        mut args: LlmRequestArgs<'_>,
    ) -> Result<LlmRequestOutcome, HookError> {
        let Some(limit) = self.input_limit else {
            args.ctx.note_default(); // not listed without an input limit
            return Ok(LlmRequestOutcome::default());
        };
        let costs: Vec<usize> = args.prompt.iter().map(|message| self.message_tokens(message)).collect();
        let total: usize = costs.iter().sum();
        if total <= limit {
            return Ok(LlmRequestOutcome::default());
        }
        // The run's own messages are the prompt's last ones (counted from the end, so that an
        // earlier processor hiding remembered messages cannot shift them); the other messages
        // before them were remembered.
        let list = args.message_list;
        let own: HashSet<&str> = list.run_messages().map(|message| message.id.as_str()).collect();
        let own_count = list.all().skip_while(|message| !own.contains(message.id.as_str())).count();
        let mut history: Vec<usize> =
            (0..args.prompt.len()).filter(|&index| args.prompt[index].role != Role::System).collect();
        history.truncate(history.len().saturating_sub(own_count));
        let mut dropped = HashSet::new();
        let mut remaining = total;
        for group in history_groups(args.prompt, &history) {
            if remaining <= limit {
                break;
            }
            remaining -= group.iter().map(|&index| costs[index]).sum::<usize>();
            dropped.extend(group);
        }
        let details = json!({
            "hook": Hook::ProcessLlmRequest.name(),
            "step": args.step_number,
            "limit": limit,
            "tokens": total,
            "kept_tokens": remaining,
            "removed_messages": dropped.len(),
        });
        if remaining > limit {
            let reason = format!(
                "The prompt needs {remaining} tokens without any remembered messages; input_limit is {limit}"
            );
            return Err(Abort::new(reason).metadata(details).into());
        }
        args.ctx.emit(DataChunk::new("token-limit", details).transient());
        let prompt = args
            .prompt
            .iter()
            .enumerate()
            .filter(|(index, _)| !dropped.contains(index))
            .map(|(_, message)| message.clone())
            .collect();
        Ok(LlmRequestOutcome { prompt: Some(prompt), response: None })
    }

    async fn process_output_stream(
        &self,
        mut args: OutputStreamArgs<'_>,
    ) -> Result<Option<Chunk>, HookError> {
        let Some(limit) = self.output_limit else {
            args.ctx.note_default(); // not listed without an output limit
            return Ok(Some(args.part));
        };
        let Chunk::TextDelta { id, text } = &args.part else { return Ok(Some(args.part)) };
        let key = match self.count {
            Count::Cumulative => "*",
            Count::Part => id.as_str(),
        };
        let used = args.ctx.state.get(key).and_then(Value::as_u64).unwrap_or(0) as usize;
        if used > limit {
            return Ok(None); // already truncated
        }
        let tokens = self.tokens(text);
        args.ctx.state.insert(key.to_owned(), json!(used + tokens));
        if used + tokens <= limit {
            return Ok(Some(args.part));
        }
        // The first delta over the limit.
        let details = json!({
            "hook": Hook::ProcessOutputStream.name(),
            "limit": limit,
            "count": self.count.name(),
            "strategy": match self.strategy { Strategy::Truncate => "truncate", Strategy::Abort => "abort" },
        });
        if self.strategy == Strategy::Abort {
            let reason = format!("The answer exceeded output_limit of {limit} tokens");
            return Err(Abort::new(reason).metadata(details).into());
        }
        args.ctx.emit(DataChunk::new("token-limit", details).transient());
        let kept = self.prefix(text, limit - used);
        Ok((!kept.is_empty()).then(|| Chunk::TextDelta { id: id.clone(), text: kept }))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::{ToolCall, ToolResult};

    fn message(role: Role, part: Part) -> PromptMessage {
        PromptMessage { role, parts: vec![part] }
    }

    /// A tool call and its result are trimmed together, never one without the other.
    #[test]
    fn a_tool_call_and_its_result_are_one_group() {
        let call = ToolCall { tool_call_id: "c1".into(), tool_name: "calculator".into(), args: json!({}) };
        let result = ToolResult {
            tool_call_id: "c1".into(),
            tool_name: "calculator".into(),
            result: json!(2),
            is_error: false,
        };
        let prompt = vec![
            message(Role::System, Part::text("be brief")),
            message(Role::User, Part::text("1 + 1?")),
            message(Role::Assistant, Part::ToolCall(call)),
            message(Role::Tool, Part::ToolResult(result)),
            message(Role::Assistant, Part::text("two")),
        ];
        assert_eq!(history_groups(&prompt, &[1, 2, 3, 4]), vec![vec![1], vec![2, 3], vec![4]]);
    }

    /// Truncation cuts at the exact token and never splits a character.
    #[test]
    fn truncation_cuts_at_a_token_and_keeps_whole_characters() {
        let limiter = TokenLimiter {
            id: "t".into(),
            bpe: Encoding::O200k.bpe(),
            input_limit: None,
            output_limit: Some(1),
            strategy: Strategy::Truncate,
            count: Count::Cumulative,
        };
        assert_eq!(limiter.tokens("echo: hello world"), 4);
        assert_eq!(limiter.prefix("echo: hello world", 2), "echo:");
        let emoji = limiter.prefix("🦀🦀🦀", 1);
        assert!("🦀🦀🦀".starts_with(&emoji), "{emoji:?} is a valid prefix");
    }
}
