//! Anthropic's Messages API (`POST {base_url}/messages`, streamed).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::decode::{Decoded, Decoder, finish_reason_of, tool_call_of, tool_result_text};
use super::sse::SseEvent;
use crate::domain::{CONTINUE_TURN, EARLIER_CONVERSATION_TURN, Part, PromptMessage, Role, ToolChoice, Usage};
use crate::model::{ModelEvent, ModelRequest};

/// Anthropic requires `max_tokens`; this is used when the settings give none.
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The request body for `model`.
pub(super) fn body(model: &str, request: &ModelRequest) -> Value {
    let system: Vec<String> =
        request.prompt.iter().filter(|message| message.role == Role::System).flat_map(texts).collect();
    let messages = user_turn_bounds(
        request.prompt.iter().filter(|message| message.role != Role::System).map(message_of).collect(),
    );
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(request.streamed));
    let settings = &request.settings;
    body.insert("max_tokens".into(), json!(settings.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)));
    let mut system = system.join("\n\n");
    if let Some(schema) = &request.structured_output {
        // No native JSON mode: the schema goes into the instructions; the runtime validates.
        system.push_str(&format!(
            "\n\nAnswer with one JSON value, and nothing else, that follows this JSON schema:\n{schema}"
        ));
    }
    if !system.trim().is_empty() {
        body.insert("system".into(), json!(system.trim()));
    }
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| json!({ "name": tool.name, "description": tool.description, "input_schema": tool.parameters }))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => json!({ "type": "auto" }),
            ToolChoice::None => json!({ "type": "none" }),
            ToolChoice::Required => json!({ "type": "any" }),
            ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
        };
        body.insert("tool_choice".into(), choice);
    }
    if let Some(temperature) = settings.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if let Some(top_p) = settings.top_p {
        body.insert("top_p".into(), json!(top_p));
    }
    if !settings.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(settings.stop));
    }
    if let Value::Object(options) = &request.provider_options {
        body.extend(options.clone());
    }
    Value::Object(body)
}

fn texts(message: &PromptMessage) -> Vec<String> {
    message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Text { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// One prompt message as content blocks; tool results travel in a `user` message.
fn message_of(message: &PromptMessage) -> Value {
    let role = if message.role == Role::Assistant { "assistant" } else { "user" };
    let content: Vec<Value> = message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Text { text } if !text.is_empty() => Some(json!({ "type": "text", "text": text })),
            Part::ToolCall(call) => Some(json!({
                "type": "tool_use", "id": call.tool_call_id, "name": call.tool_name,
                "input": if call.args.is_object() { call.args.clone() } else { json!({}) },
            })),
            Part::ToolResult(result) => Some(json!({
                "type": "tool_result",
                "tool_use_id": result.tool_call_id,
                "content": tool_result_text(&result.result),
                "is_error": result.is_error,
            })),
            Part::File { media_type, url, .. } if media_type.starts_with("image/") && !url.is_empty() => {
                Some(json!({ "type": "image", "source": { "type": "url", "url": url } }))
            }
            _ => None,
        })
        .collect();
    json!({ "role": role, "content": content })
}

/// Makes the turns valid for the Messages API, which wants non-empty content, a user turn
/// first and (on current models, which refuse assistant prefill) a user turn last: messages
/// with nothing to send are left out, and a prompt that would open or close with an assistant
/// turn gets a short user turn there ([`EARLIER_CONVERSATION_TURN`], [`CONTINUE_TURN`]) — a
/// recalled history window can start mid-conversation.
fn user_turn_bounds(mut messages: Vec<Value>) -> Vec<Value> {
    messages.retain(|message| message["content"].as_array().is_some_and(|content| !content.is_empty()));
    let is_assistant = |message: &Value| message["role"] == "assistant";
    let user_turn = |text: &str| json!({ "role": "user", "content": [{ "type": "text", "text": text }] });
    if messages.first().is_some_and(is_assistant) {
        messages.insert(0, user_turn(EARLIER_CONVERSATION_TURN));
    }
    if messages.last().is_some_and(is_assistant) {
        messages.push(user_turn(CONTINUE_TURN));
    }
    messages
}

/// Turns the Messages stream (`message_start`, `content_block_*`, `message_delta`,
/// `message_stop`) into model events.
#[derive(Debug, Default)]
pub(super) struct AnthropicDecoder {
    /// Tool-use blocks being streamed, by block index: id, name, JSON so far.
    tool_blocks: BTreeMap<u64, (String, String, String)>,
    stop_reason: Option<String>,
    usage: Usage,
    saw_tool_call: bool,
}

/// The events of an answer that came in one piece (a `message`), in the order a stream would
/// have brought them; `Err` says what is wrong with it.
pub(super) fn answer(message: &Value) -> Result<Vec<ModelEvent>, String> {
    if message.get("type").and_then(Value::as_str) == Some("error") {
        return Err(message["error"]["message"].as_str().unwrap_or("unknown error").to_owned());
    }
    let blocks = message.get("content").and_then(Value::as_array).ok_or("the answer has no `content`")?;
    let mut events = Vec::new();
    for block in blocks {
        let text = |key: &str| block[key].as_str().unwrap_or_default().to_owned();
        match block["type"].as_str() {
            Some("text") if !text("text").is_empty() => events.push(ModelEvent::TextDelta(text("text"))),
            Some("thinking") if !text("thinking").is_empty() => {
                events.push(ModelEvent::ReasoningDelta(text("thinking")));
            }
            Some("tool_use") => {
                events.push(tool_call_of(text("id"), text("name"), &block["input"].to_string()))
            }
            _ => {}
        }
    }
    let has_tool_calls = events.iter().any(|event| matches!(event, ModelEvent::ToolCall(_)));
    let finish_reason = finish_reason_of(message.get("stop_reason").and_then(Value::as_str), has_tool_calls);
    let usage = &message["usage"];
    let usage = Usage {
        input_tokens: usage["input_tokens"].as_u64().unwrap_or(0),
        output_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
    };
    events.push(ModelEvent::Finish { finish_reason, usage });
    Ok(events)
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, event: SseEvent) -> Decoded {
        let data: Value = match serde_json::from_str(&event.data) {
            Ok(data) => data,
            Err(error) => return Decoded::Malformed(format!("an event is not JSON: {error}")),
        };
        let kind = data.get("type").and_then(Value::as_str).unwrap_or(event.event.as_str()).to_owned();
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let mut events = Vec::new();
        match kind.as_str() {
            "message_start" => {
                let usage = &data["message"]["usage"];
                self.usage.input_tokens = usage["input_tokens"].as_u64().unwrap_or(0);
                self.usage.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let block = &data["content_block"];
                match block["type"].as_str() {
                    Some("tool_use") => {
                        let id = block["id"].as_str().unwrap_or_default().to_owned();
                        let name = block["name"].as_str().unwrap_or_default().to_owned();
                        self.tool_blocks.insert(index, (id, name, String::new()));
                    }
                    Some("text") => {
                        if let Some(text) = block["text"].as_str().filter(|text| !text.is_empty()) {
                            events.push(ModelEvent::TextDelta(text.to_owned()));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        events.push(ModelEvent::TextDelta(
                            delta["text"].as_str().unwrap_or_default().to_owned(),
                        ));
                    }
                    Some("thinking_delta") => events.push(ModelEvent::ReasoningDelta(
                        delta["thinking"].as_str().unwrap_or_default().to_owned(),
                    )),
                    Some("input_json_delta") => {
                        if let Some(block) = self.tool_blocks.get_mut(&index) {
                            block.2.push_str(delta["partial_json"].as_str().unwrap_or_default());
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some((id, name, arguments)) = self.tool_blocks.remove(&index) {
                    self.saw_tool_call = true;
                    events.push(tool_call_of(id, name, &arguments));
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(output) = data["usage"]["output_tokens"].as_u64() {
                    self.usage.output_tokens = output;
                }
            }
            "message_stop" => return Decoded::End,
            "error" => {
                let message = data["error"]["message"].as_str().unwrap_or("unknown error");
                return Decoded::Failed(message.to_owned());
            }
            _ => {} // ping, and event types added later
        }
        Decoded::Events(events)
    }

    fn end(&mut self) -> Vec<ModelEvent> {
        let mut events: Vec<ModelEvent> = std::mem::take(&mut self.tool_blocks)
            .into_values()
            .map(|(id, name, arguments)| tool_call_of(id, name, &arguments))
            .collect();
        let has_tool_calls = self.saw_tool_call || !events.is_empty();
        let finish_reason = finish_reason_of(self.stop_reason.as_deref(), has_tool_calls);
        events.push(ModelEvent::Finish { finish_reason, usage: self.usage });
        events
    }
}
