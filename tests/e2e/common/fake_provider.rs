//! A fake model provider on loopback: a real HTTP/1.1 server that answers each request with the
//! next scripted reply — a server-sent-event stream (optionally slow, or stalling), an error
//! status, or a redirect — and records what it was sent and whether the client hung up early.
//! A request that does not ask for a stream (`"stream": false`) gets the scripted events folded
//! into the one answer the provider would have sent instead. One started
//! [`FakeProvider::keeping_alive`] keeps the connection of such an answer open for the next
//! request, and counts its open connections.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200` and these SSE `data:` payloads (each its own event), `gap` apart; then, if
    /// `stall` is set, silence for that long before closing.
    Events { data: Vec<String>, gap: Duration, stall: Option<Duration> },
    /// An error status with a JSON body, and a `Retry-After` header when set.
    Status { status: u16, retry_after: Option<String>, message: String },
    /// `307` to this URL.
    Redirect(String),
}

impl Reply {
    /// A quick SSE stream of these `data:` payloads.
    pub fn events(data: Vec<String>) -> Reply {
        Reply::Events { data, gap: Duration::ZERO, stall: None }
    }

    pub fn status(status: u16, message: &str) -> Reply {
        Reply::Status { status, retry_after: None, message: message.into() }
    }
}

/// What the fake saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

#[derive(Clone)]
pub struct FakeProvider {
    pub base_url: String,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    hung_up: Arc<Mutex<bool>>,
    keep_alive: bool,
    open: Arc<AtomicUsize>,
}

impl FakeProvider {
    pub async fn start(replies: impl IntoIterator<Item = Reply>) -> FakeProvider {
        FakeProvider::started(replies, false).await
    }

    /// [`FakeProvider::start`], keeping the connection of an answer in one piece open.
    pub async fn keeping_alive(replies: impl IntoIterator<Item = Reply>) -> FakeProvider {
        FakeProvider::started(replies, true).await
    }

    async fn started(replies: impl IntoIterator<Item = Reply>, keep_alive: bool) -> FakeProvider {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = FakeProvider {
            base_url: format!("http://{}/v1", listener.local_addr().unwrap()),
            replies: Arc::new(Mutex::new(replies.into_iter().collect())),
            seen: Arc::default(),
            hung_up: Arc::default(),
            keep_alive,
            open: Arc::default(),
        };
        let server = fake.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let server = server.clone();
                server.open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    server.answer(socket).await;
                    server.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        fake
    }

    /// The connections clients hold open to it now.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// True once a client closed a stream before it ended.
    pub fn hung_up(&self) -> bool {
        *self.hung_up.lock().unwrap()
    }

    async fn answer(&self, socket: tokio::net::TcpStream) {
        let mut reader = BufReader::new(socket);
        while self.answer_one(&mut reader).await {}
        let _ = reader.get_mut().shutdown().await;
    }

    /// Answers one request; true when the connection stays open for another.
    async fn answer_one(&self, reader: &mut BufReader<tokio::net::TcpStream>) -> bool {
        let Some(seen) = read_request(reader).await else { return false };
        let streamed = seen.body.get("stream") != Some(&Value::Bool(false));
        self.seen.lock().unwrap().push(seen);
        let reply = {
            let mut replies = self.replies.lock().unwrap();
            if replies.len() > 1 { replies.pop_front() } else { replies.front().cloned() }
        };
        let socket = reader.get_mut();
        match reply.expect("a scripted reply") {
            Reply::Status { status, retry_after, message } => {
                let body = serde_json::json!({ "error": { "message": message } }).to_string();
                let retry = retry_after.map(|value| format!("Retry-After: {value}\r\n")).unwrap_or_default();
                let response = format!(
                    "HTTP/1.1 {status} Error\r\nContent-Type: application/json\r\n{retry}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            }
            Reply::Redirect(location) => {
                let response = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = socket.write_all(response.as_bytes()).await;
            }
            Reply::Events { data, gap, stall } if !streamed => {
                tokio::time::sleep(gap * data.len() as u32 + stall.unwrap_or_default()).await;
                let body = one_piece(&data).to_string();
                let connection = if self.keep_alive { "keep-alive" } else { "close" };
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n{body}",
                    body.len()
                );
                return socket.write_all(response.as_bytes()).await.is_ok() && self.keep_alive;
            }
            Reply::Events { data, gap, stall } => {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return false;
                }
                for event in data {
                    if !gap.is_zero() {
                        tokio::time::sleep(gap).await;
                    }
                    let written = socket.write_all(format!("data: {event}\n\n").as_bytes()).await;
                    if written.is_err() || socket.flush().await.is_err() {
                        *self.hung_up.lock().unwrap() = true;
                        return false;
                    }
                }
                if let Some(stall) = stall {
                    tokio::time::sleep(stall).await;
                }
            }
        }
        false
    }
}

/// Streamed events folded into the answer a provider sends when asked for no stream: an OpenAI
/// `chat.completion`, or an Anthropic `message` when the events are Anthropic's.
fn one_piece(data: &[String]) -> Value {
    let events: Vec<Value> = data.iter().filter_map(|event| serde_json::from_str(event).ok()).collect();
    if events.iter().any(|event| event.get("type").is_some()) {
        return anthropic_message(&events);
    }
    let (mut text, mut reasoning, mut finish, mut usage) =
        (String::new(), String::new(), Value::Null, Value::Null);
    let mut calls: std::collections::BTreeMap<u64, (String, String, String)> = Default::default();
    for event in &events {
        if event["usage"].is_object() {
            usage = event["usage"].clone();
        }
        let choice = &event["choices"][0];
        let delta = &choice["delta"];
        text.push_str(delta["content"].as_str().unwrap_or_default());
        reasoning.push_str(delta["reasoning_content"].as_str().unwrap_or_default());
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let entry = calls.entry(call["index"].as_u64().unwrap_or(0)).or_default();
            entry.0.push_str(call["id"].as_str().unwrap_or_default());
            entry.1.push_str(call["function"]["name"].as_str().unwrap_or_default());
            entry.2.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
        }
        if choice["finish_reason"].is_string() {
            finish = choice["finish_reason"].clone();
        }
    }
    let tool_calls: Vec<Value> = calls
        .into_values()
        .map(|(id, name, arguments)| {
            serde_json::json!({ "id": id, "type": "function", "function": { "name": name, "arguments": arguments } })
        })
        .collect();
    let mut message = serde_json::json!({ "role": "assistant", "content": text });
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::String(reasoning);
    }
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    serde_json::json!({ "object": "chat.completion", "choices": [{ "index": 0, "message": message, "finish_reason": finish }], "usage": usage })
}

/// Anthropic's streamed events folded into one `message`.
fn anthropic_message(events: &[Value]) -> Value {
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial_json: Vec<String> = Vec::new();
    let (mut stop_reason, mut usage) = (Value::Null, serde_json::json!({}));
    for event in events {
        let index = event["index"].as_u64().unwrap_or(0) as usize;
        match event["type"].as_str() {
            Some("message_start") => usage = event["message"]["usage"].clone(),
            Some("content_block_start") => {
                blocks.resize(index + 1, Value::Null);
                partial_json.resize(index + 1, String::new());
                blocks[index] = event["content_block"].clone();
            }
            Some("content_block_delta") => {
                let delta = &event["delta"];
                if blocks.len() <= index {
                    // A stream that opened no block: a text (or thinking) block it is.
                    blocks.resize(index + 1, Value::Null);
                    partial_json.resize(index + 1, String::new());
                    let kind = if delta["type"] == "thinking_delta" { "thinking" } else { "text" };
                    blocks[index] = serde_json::json!({ "type": kind });
                }
                let block = &mut blocks[index];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        let text = format!(
                            "{}{}",
                            block["text"].as_str().unwrap_or_default(),
                            delta["text"].as_str().unwrap_or_default()
                        );
                        block["text"] = Value::String(text);
                    }
                    Some("thinking_delta") => {
                        let text = format!(
                            "{}{}",
                            block["thinking"].as_str().unwrap_or_default(),
                            delta["thinking"].as_str().unwrap_or_default()
                        );
                        block["thinking"] = Value::String(text);
                    }
                    Some("input_json_delta") => {
                        partial_json[index].push_str(delta["partial_json"].as_str().unwrap_or_default())
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                stop_reason = event["delta"]["stop_reason"].clone();
                if let Some(output) = event["usage"]["output_tokens"].as_u64() {
                    usage["output_tokens"] = output.into();
                }
            }
            _ => {}
        }
    }
    for (block, json) in blocks.iter_mut().zip(&partial_json) {
        if block["type"] == "tool_use" && !json.is_empty() {
            block["input"] = serde_json::from_str(json).unwrap_or(Value::Null);
        }
    }
    serde_json::json!({ "type": "message", "role": "assistant", "content": blocks, "stop_reason": stop_reason, "usage": usage })
}

/// Reads one HTTP/1.1 request with a JSON body; `None` when the connection closed instead.
pub async fn read_request(reader: &mut BufReader<tokio::net::TcpStream>) -> Option<Seen> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
        return None;
    }
    let mut headers = Vec::new();
    let mut content_length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).await.unwrap();
        if header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                content_length = value.trim().parse().unwrap();
            }
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body).await.unwrap();
    let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_owned();
    Some(Seen { path, headers, body: serde_json::from_slice(&body).unwrap_or(Value::Null) })
}

/// JSON payloads as SSE data.
pub fn json_events(values: impl IntoIterator<Item = Value>) -> Vec<String> {
    values.into_iter().map(|value| value.to_string()).collect()
}

/// OpenAI chunks streaming `text` word by word, then a finish reason, usage and `[DONE]`.
pub fn openai_text(text: &str) -> Vec<String> {
    let mut events = json_events(
        text.split_inclusive(' ')
            .map(|word| serde_json::json!({ "choices": [{ "index": 0, "delta": { "content": word } }] })),
    );
    events.extend(json_events([
        serde_json::json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "stop" }] }),
        serde_json::json!({ "choices": [], "usage": { "prompt_tokens": 11, "completion_tokens": 7 } }),
    ]));
    events.push("[DONE]".into());
    events
}
