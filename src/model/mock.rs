//! The mock provider: deterministic models that need no network.
//!
//! - `mock/echo` streams `echo: <last user text>` word by word.
//! - `mock/inspect` answers with a JSON description of the exact prompt it received, so users and
//!   tests can see what reached the model.
//! - `mock/script` plays the agent's scripted replies: reply *n* answers the run's *n*-th model
//!   call (the last reply repeats), with text, reasoning, tool calls, an API error, delays, and
//!   the user's text replayed in deltas of chosen sizes.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use super::{LanguageModel, ModelError, ModelEvent, ModelRequest, ModelStream};
use crate::config::{MockReply, MockScript};
use crate::domain::{FinishReason, PromptMessage, Role, ToolCall, Usage, text_of};

/// Id of the echo model.
pub const ECHO: &str = "mock/echo";
/// Id of the prompt-inspecting model.
pub const INSPECT: &str = "mock/inspect";
/// Id of the scripted model.
pub const SCRIPT: &str = "mock/script";

enum Behaviour {
    Echo,
    Inspect,
    Scripted(Arc<MockScript>),
}

/// A mock model.
pub struct MockModel {
    id: &'static str,
    behaviour: Behaviour,
}

impl MockModel {
    /// `mock/echo`.
    pub fn echo() -> MockModel {
        MockModel { id: ECHO, behaviour: Behaviour::Echo }
    }

    /// `mock/inspect`.
    pub fn inspect() -> MockModel {
        MockModel { id: INSPECT, behaviour: Behaviour::Inspect }
    }

    /// `mock/script` playing `script`.
    pub fn scripted(script: Arc<MockScript>) -> MockModel {
        MockModel { id: SCRIPT, behaviour: Behaviour::Scripted(script) }
    }

    fn reply_for(&self, request: &ModelRequest) -> MockReply {
        match &self.behaviour {
            Behaviour::Echo => MockReply {
                text: Some(format!("echo: {}", last_user_text(&request.prompt))),
                ..MockReply::default()
            },
            Behaviour::Inspect => {
                MockReply { deltas: vec![describe_prompt(request)], ..MockReply::default() }
            }
            Behaviour::Scripted(script) => {
                let index = usize::try_from(request.call_index).unwrap_or(usize::MAX);
                let last = script.replies.len().saturating_sub(1);
                script.replies.get(index.min(last)).cloned().unwrap_or_default()
            }
        }
    }
}

#[async_trait::async_trait]
impl LanguageModel for MockModel {
    fn id(&self) -> &str {
        self.id
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let reply = self.reply_for(&request);
        if reply.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(reply.delay_ms)).await;
        }
        if let Some(error) = reply.error {
            return Err(ModelError::Rejected {
                model: self.id.to_owned(),
                status: error.status,
                message: error.message,
            });
        }
        let mut reply = reply;
        if !reply.repeat_input.is_empty() {
            let input = last_user_text(&request.prompt);
            reply.deltas.extend(split_chars(&input, &reply.repeat_input));
        }
        let chunk_delay = Duration::from_millis(reply.chunk_delay_ms);
        let events = reply_events(reply, prompt_words(&request.prompt));
        let stream = futures::stream::iter(events).then(move |event| async move {
            if !chunk_delay.is_zero() {
                tokio::time::sleep(chunk_delay).await;
            }
            Ok(event)
        });
        Ok(Box::pin(stream))
    }
}

/// The events of `reply`, made as the stream is read: a long scripted answer costs its text, not
/// an event per word up front (so memory figures under the mock are the server's, not its).
fn reply_events(reply: MockReply, input_tokens: u64) -> impl Iterator<Item = ModelEvent> + Send {
    let text = reply.text.unwrap_or_default();
    let default_reason =
        if reply.tool_calls.is_empty() { FinishReason::Stop } else { FinishReason::ToolCalls };
    let count = |items: usize| u64::try_from(items).unwrap_or(u64::MAX);
    let output_tokens = count(usize::from(reply.reasoning.is_some()))
        + count(word_count(&text))
        + count(reply.deltas.len())
        + count(reply.tool_calls.len());
    let finish = ModelEvent::Finish {
        finish_reason: reply.finish_reason.unwrap_or(default_reason),
        usage: Usage { input_tokens, output_tokens },
    };
    let tool_calls = reply.tool_calls.into_iter().enumerate().map(|(index, call)| {
        ModelEvent::ToolCall(ToolCall {
            tool_call_id: format!("call_{index}_{}", crate::domain::new_id()),
            tool_name: call.name,
            args: call.args,
        })
    });
    reply
        .reasoning
        .map(ModelEvent::ReasoningDelta)
        .into_iter()
        .chain(Words::new(text).map(ModelEvent::TextDelta))
        .chain(reply.deltas.into_iter().map(ModelEvent::TextDelta))
        .chain(tool_calls)
        .chain(std::iter::once(finish))
}

/// The deltas of a text, one word each with the space before it (the first without), empty
/// ones left out: together they are the text.
struct Words {
    text: String,
    /// Where the next delta starts.
    at: usize,
    started: bool,
}

impl Words {
    fn new(text: String) -> Words {
        Words { text, at: 0, started: false }
    }
}

impl Iterator for Words {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        if !self.started {
            self.started = true;
            self.at = self.text.find(' ').unwrap_or(self.text.len());
            if self.at > 0 {
                return Some(self.text[..self.at].to_owned());
            }
        }
        if self.at >= self.text.len() {
            return None;
        }
        let start = self.at;
        self.at = self.text[start + 1..].find(' ').map_or(self.text.len(), |offset| start + 1 + offset);
        Some(self.text[start..self.at].to_owned())
    }
}

/// How many deltas [`Words`] makes of `text`.
fn word_count(text: &str) -> usize {
    let pieces = text.matches(' ').count() + 1;
    if text.split(' ').next().is_some_and(str::is_empty) { pieces - 1 } else { pieces }
}

/// The text of the prompt's last user message.
fn last_user_text(prompt: &[PromptMessage]) -> String {
    prompt.iter().rev().find(|message| message.role == Role::User).map(prompt_text).unwrap_or_default()
}

/// Splits text into deltas of `sizes` characters each, cycled (a size of 0 counts as 1).
fn split_chars(text: &str, sizes: &[usize]) -> Vec<String> {
    let mut deltas = Vec::new();
    let mut chars = text.chars().peekable();
    for size in sizes.iter().cycle() {
        if chars.peek().is_none() {
            break;
        }
        deltas.push(chars.by_ref().take((*size).max(1)).collect());
    }
    deltas
}

fn prompt_text(message: &PromptMessage) -> String {
    text_of(&message.parts)
}

fn prompt_words(prompt: &[PromptMessage]) -> u64 {
    let words: usize = prompt.iter().map(|message| prompt_text(message).split_whitespace().count()).sum();
    u64::try_from(words).unwrap_or(u64::MAX)
}

/// The JSON that `mock/inspect` answers with.
fn describe_prompt(request: &ModelRequest) -> String {
    let system: Vec<String> =
        request.prompt.iter().filter(|message| message.role == Role::System).map(prompt_text).collect();
    let messages: Vec<Value> = request
        .prompt
        .iter()
        .filter(|message| message.role != Role::System)
        .map(|message| {
            json!({
                "role": message.role,
                "text": prompt_text(message),
                "parts": message.parts,
            })
        })
        .collect();
    let tools: Vec<&str> = request.tools.iter().map(|tool| tool.name.as_str()).collect();
    json!({
        "system": system,
        "messages": messages,
        "tools": tools,
        "tool_choice": request.tool_choice,
        "settings": request.settings,
        "provider_options": request.provider_options,
        "structured_output": request.structured_output,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Word deltas concatenate back to the exact text (leading, doubled and trailing spaces too),
    /// and are as many as `word_count` says.
    #[test]
    fn words_round_trip_and_are_counted() {
        for text in ["echo: hello  world", " leading", "trailing ", "", " ", "one", "a  b "] {
            let deltas: Vec<String> = Words::new(text.to_owned()).collect();
            assert_eq!(deltas.concat(), text, "{text:?}");
            assert!(deltas.iter().all(|delta| !delta.is_empty()), "{text:?}: {deltas:?}");
            assert_eq!(deltas.len(), word_count(text), "{text:?}: {deltas:?}");
        }
        let deltas: Vec<String> = Words::new("echo: hello  world".to_owned()).collect();
        assert_eq!(deltas, ["echo:", " hello", " ", " world"]);
    }

    /// Replayed input comes out in deltas of the sizes given, cycled, characters not bytes.
    #[test]
    fn split_chars_cycles_its_sizes() {
        assert_eq!(split_chars("héllo wörld", &[1, 3]), ["h", "éll", "o", " wö", "r", "ld"]);
        assert_eq!(split_chars("ab", &[0]), ["a", "b"]);
        assert!(split_chars("", &[2]).is_empty());
    }
}
