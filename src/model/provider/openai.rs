//! The OpenAI chat completions API (`POST {base_url}/chat/completions`, streamed), spoken by
//! OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio, Groq, Together and others.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;

use serde_json::{Map, Value, json};

use super::decode::{Decoded, Decoder, finish_reason_of, tool_call_of, tool_result_text};
use super::sse::SseEvent;
use crate::domain::{Part, PromptMessage, Role, ToolChoice, Usage};
use crate::model::{ModelEvent, ModelRequest};

/// The request body for `model`.
pub(super) fn body(model: &str, request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(request.prompt.iter().flat_map(messages_of).collect()));
    body.insert("stream".into(), json!(request.streamed));
    if request.streamed {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": { "name": tool.name, "description": tool.description, "parameters": tool.parameters },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({ "type": "function", "function": { "name": name } }),
        };
        body.insert("tool_choice".into(), choice);
    }
    let settings = &request.settings;
    if let Some(temperature) = settings.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if let Some(max_tokens) = settings.max_tokens {
        body.insert("max_tokens".into(), json!(max_tokens));
    }
    if let Some(top_p) = settings.top_p {
        body.insert("top_p".into(), json!(top_p));
    }
    if !settings.stop.is_empty() {
        body.insert("stop".into(), json!(settings.stop));
    }
    if let Some(seed) = settings.seed {
        body.insert("seed".into(), json!(seed));
    }
    if let Some(schema) = &request.structured_output {
        // Strict mode only for schemas it accepts; the answer is validated against the schema
        // either way (and retried or refused by the runtime).
        let strict = strict_ready(schema);
        body.insert(
            "response_format".into(),
            json!({ "type": "json_schema", "json_schema": { "name": "output", "schema": schema, "strict": strict } }),
        );
    }
    // Provider options pass through untouched, last, so they can override anything above.
    if let Value::Object(options) = &request.provider_options {
        body.extend(options.clone());
    }
    Value::Object(body)
}

/// One prompt message as chat messages: tool results become one `tool` message each.
fn messages_of(message: &PromptMessage) -> Vec<Value> {
    let text: String = message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    match message.role {
        Role::System => vec![json!({ "role": "system", "content": text })],
        Role::User => vec![json!({ "role": "user", "content": user_content(message, text) })],
        Role::Assistant => {
            let calls: Vec<Value> = message
                .parts
                .iter()
                .filter_map(|part| match part {
                    Part::ToolCall(call) => Some(json!({
                        "id": call.tool_call_id,
                        "type": "function",
                        "function": { "name": call.tool_name, "arguments": call.args.to_string() },
                    })),
                    _ => None,
                })
                .collect();
            let mut assistant = json!({ "role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) } });
            if !calls.is_empty() {
                assistant["tool_calls"] = Value::Array(calls);
            }
            vec![assistant]
        }
        Role::Tool => message
            .parts
            .iter()
            .filter_map(|part| match part {
                Part::ToolResult(result) => Some(json!({
                    "role": "tool",
                    "tool_call_id": result.tool_call_id,
                    "content": tool_result_text(&result.result),
                })),
                _ => None,
            })
            .collect(),
    }
}

/// A user message's content: plain text, or parts when it carries images.
fn user_content(message: &PromptMessage, text: String) -> Value {
    let images: Vec<Value> = message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::File { media_type, url, .. } if media_type.starts_with("image/") && !url.is_empty() => {
                Some(json!({ "type": "image_url", "image_url": { "url": url } }))
            }
            _ => None,
        })
        .collect();
    if images.is_empty() {
        return json!(text);
    }
    let mut parts = vec![json!({ "type": "text", "text": text })];
    parts.extend(images);
    Value::Array(parts)
}

/// Turns streamed `chat.completion.chunk`s into model events. Tool calls arrive in pieces (by
/// index) and are emitted whole when the stream ends.
#[derive(Debug, Default)]
pub(super) struct OpenAiDecoder {
    tool_calls: BTreeMap<u64, (String, String, String)>,
    finish_reason: Option<String>,
    usage: Usage,
}

/// A streamed `chat.completion.chunk`, as much of it as the decoder reads: typed, its strings
/// borrowed from the event where they need no unescaping (a token's event is parsed without
/// building a JSON tree).
#[derive(Debug, Deserialize)]
struct ChunkWire<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<ChoiceWire<'a>>>,
    #[serde(default)]
    usage: Option<UsageWire>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ChoiceWire<'a> {
    #[serde(default, borrow)]
    delta: Option<DeltaWire<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
struct DeltaWire<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ToolCallWire<'a>>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallWire<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<FunctionWire<'a>>,
}

#[derive(Debug, Deserialize)]
struct FunctionWire<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct UsageWire {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl Decoder for OpenAiDecoder {
    fn event(&mut self, event: SseEvent) -> Decoded {
        if event.data == "[DONE]" {
            return Decoded::End;
        }
        let chunk: ChunkWire<'_> = match serde_json::from_str(&event.data) {
            Ok(chunk) => chunk,
            Err(error) => return Decoded::Malformed(format!("a chunk is not JSON: {error}")),
        };
        if let Some(error) = chunk.error.filter(|error| !error.is_null()) {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("unknown error");
            return Decoded::Failed(message.to_owned());
        }
        if let Some(usage) = chunk.usage {
            self.usage.input_tokens = usage.prompt_tokens.unwrap_or(self.usage.input_tokens);
            self.usage.output_tokens = usage.completion_tokens.unwrap_or(self.usage.output_tokens);
        }
        let mut events = Vec::new();
        let Some(choice) = chunk.choices.and_then(|choices| choices.into_iter().next()) else {
            return Decoded::Events(events);
        };
        let delta = choice.delta.unwrap_or_default();
        let present =
            |text: &Option<Cow<'_, str>>| text.as_deref().filter(|text| !text.is_empty()).map(str::to_owned);
        for reasoning in [&delta.reasoning_content, &delta.reasoning].into_iter().filter_map(present) {
            events.push(ModelEvent::ReasoningDelta(reasoning));
        }
        if let Some(text) = present(&delta.content) {
            events.push(ModelEvent::TextDelta(text));
        }
        for call in delta.tool_calls.into_iter().flatten() {
            let entry = self.tool_calls.entry(call.index.unwrap_or(0)).or_default();
            if let Some(id) = call.id {
                entry.0 = id.into_owned();
            }
            if let Some(function) = call.function {
                entry.1.push_str(function.name.as_deref().unwrap_or_default());
                entry.2.push_str(function.arguments.as_deref().unwrap_or_default());
            }
        }
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(reason.into_owned());
        }
        Decoded::Events(events)
    }

    fn end(&mut self) -> Vec<ModelEvent> {
        let mut events: Vec<ModelEvent> = std::mem::take(&mut self.tool_calls)
            .into_values()
            .map(|(id, name, arguments)| tool_call_of(id, name, &arguments))
            .collect();
        let finish_reason = finish_reason_of(self.finish_reason.as_deref(), !events.is_empty());
        events.push(ModelEvent::Finish { finish_reason, usage: self.usage });
        events
    }
}

/// The events of an answer that came in one piece (a `chat.completion`), in the order a stream
/// would have brought them; `Err` says what is wrong with it.
pub(super) fn answer(completion: &Value) -> Result<Vec<ModelEvent>, String> {
    if let Some(error) = completion.get("error") {
        return Err(error.get("message").and_then(Value::as_str).unwrap_or("unknown error").to_owned());
    }
    let choice = completion
        .get("choices")
        .and_then(|choices| choices.get(0))
        .ok_or("the answer has no `choices[0]`")?;
    let message = &choice["message"];
    let mut events = Vec::new();
    for key in ["reasoning_content", "reasoning"] {
        if let Some(reasoning) = message.get(key).and_then(Value::as_str).filter(|text| !text.is_empty()) {
            events.push(ModelEvent::ReasoningDelta(reasoning.to_owned()));
        }
    }
    if let Some(text) = message.get("content").and_then(Value::as_str).filter(|text| !text.is_empty()) {
        events.push(ModelEvent::TextDelta(text.to_owned()));
    }
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
        let function = &call["function"];
        events.push(tool_call_of(
            text(&call["id"]),
            text(&function["name"]),
            function["arguments"].as_str().unwrap_or(""),
        ));
    }
    let has_tool_calls = events.iter().any(|event| matches!(event, ModelEvent::ToolCall(_)));
    let finish_reason = finish_reason_of(choice.get("finish_reason").and_then(Value::as_str), has_tool_calls);
    let usage = &completion["usage"];
    let usage = Usage {
        input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
    };
    events.push(ModelEvent::Finish { finish_reason, usage });
    Ok(events)
}

/// True when OpenAI's strict structured outputs accept `schema` as it is: every object closes its
/// properties (`additionalProperties: false`) and requires all of them, all the way down.
fn strict_ready(schema: &Value) -> bool {
    let Value::Object(node) = schema else { return true };
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        let required: Vec<&str> = node
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let closed = node.get("additionalProperties") == Some(&Value::Bool(false));
        if !closed || properties.keys().any(|key| !required.contains(&key.as_str())) {
            return false;
        }
        if !properties.values().all(strict_ready) {
            return false;
        }
    }
    let nested = ["items", "anyOf", "allOf", "oneOf", "$defs", "definitions"];
    nested.iter().filter_map(|key| node.get(*key)).all(|value| match value {
        Value::Array(items) => items.iter().all(strict_ready),
        Value::Object(map) if map.contains_key("type") || map.contains_key("properties") => {
            strict_ready(value)
        }
        Value::Object(map) => map.values().all(strict_ready),
        _ => true,
    })
}
