//! The G scenarios' model provider: an OpenAI-compatible chat completions endpoint on a loopback
//! port that answers at once, so that what a request through agentwire takes beyond the same
//! request sent to it directly is what agentwire adds.
//!
//! The model name says how many tokens to answer with (`tokens-200`). A streamed answer is one
//! server-sent event per token, each written on its own (the server yields between them, as a
//! provider sampling tokens does), then the finish reason, the usage and `[DONE]`; an answer
//! that is not streamed is one `chat.completion`.

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use serde::Deserialize;
use tokio::net::TcpListener;

/// The gap between two frames of a stream that counts as a stall.
pub(super) const STALL: Duration = Duration::from_millis(50);

/// The fake's model of `tokens` tokens.
pub(super) fn model(tokens: usize) -> String {
    format!("tokens-{tokens}")
}

/// What the fake reads of a request.
#[derive(Debug, Deserialize)]
struct Asked {
    model: String,
    #[serde(default)]
    stream: bool,
}

/// The `index`th token of an answer.
fn token(index: usize) -> String {
    format!(" w{index}")
}

/// One streamed `chat.completion.chunk` event: a token, or the finish reason, or the usage.
fn event(delta: &str, finish: Option<&str>, usage: Option<usize>) -> Bytes {
    let finish = finish.map_or("null".to_owned(), |reason| format!("\"{reason}\""));
    let (choices, usage) = match usage {
        Some(tokens) => (
            "[]".to_owned(),
            format!(
                r#","usage":{{"prompt_tokens":8,"completion_tokens":{tokens},"total_tokens":{}}}"#,
                tokens + 8
            ),
        ),
        None => (format!(r#"[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]"#), String::new()),
    };
    Bytes::from(format!(
        "data: {{\"id\":\"chatcmpl-fake\",\"object\":\"chat.completion.chunk\",\"model\":\"fake\",\"choices\":{choices}{usage}}}\n\n"
    ))
}

/// The events of a streamed answer of `tokens` tokens, in order.
fn events(tokens: usize) -> Vec<Bytes> {
    let mut events: Vec<Bytes> = (0..tokens)
        .map(|index| event(&serde_json::json!({ "content": token(index) }).to_string(), None, None))
        .collect();
    events.push(event("{}", Some("stop"), None));
    events.push(event("", None, Some(tokens)));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

/// The `chat.completion` of an answer of `tokens` tokens that is not streamed.
fn completion(tokens: usize) -> Bytes {
    let text: String = (0..tokens).map(token).collect();
    Bytes::from(
        serde_json::json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": "fake",
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": tokens + 8 },
        })
        .to_string(),
    )
}

async fn chat_completions(body: Bytes) -> Response {
    let asked: Option<Asked> = serde_json::from_slice(&body).ok();
    let tokens = asked.as_ref().and_then(|asked| asked.model.strip_prefix("tokens-")?.parse::<usize>().ok());
    let (Some(asked), Some(tokens)) = (asked, tokens) else {
        return Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .body(Body::from(r#"{"error":{"message":"the fake serves models `tokens-<n>`"}}"#))
            .unwrap_or_default();
    };
    if !asked.stream {
        return Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(completion(tokens)))
            .unwrap_or_default();
    }
    // One frame per event, each written before the next is made: a yield between them lets the
    // connection flush it, as it would between two sampled tokens.
    let frames = futures::stream::iter(events(tokens)).then(|frame| async move {
        tokio::task::yield_now().await;
        Ok::<_, std::convert::Infallible>(frame)
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(frames))
        .unwrap_or_default()
}

/// Starts the fake on a free loopback port; returns its base URL (`http://…/v1`).
pub(super) async fn start() -> Result<String, String> {
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|error| error.to_string())?;
    let address = listener.local_addr().map_err(|error| error.to_string())?;
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(chat_completions));
    // Nagle's algorithm off, as a provider's server and agentwire's have it.
    let listener = axum::serve::ListenerExt::tap_io(listener, |connection| {
        let _ = connection.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{address}/v1"))
}

/// The body agentwire sends the fake for a user's `text` to `model`, streamed or not: what the
/// direct client sends too.
pub(super) fn request_body(model: &str, text: &str, streamed: bool) -> Bytes {
    let mut body = serde_json::json!({
        "model": model,
        "messages": [{ "role": "user", "content": text }],
        "stream": streamed,
    });
    if streamed {
        body["stream_options"] = serde_json::json!({ "include_usage": true });
    }
    Bytes::from(body.to_string())
}

/// What a client saw of one streamed answer: when its first token came, how many tokens came,
/// and how many gaps between two arrivals were stalls.
#[derive(Debug, Clone, Copy, Default)]
pub struct Arrivals {
    /// From the request to the first token.
    pub first_token: Option<Duration>,
    /// Tokens received.
    pub tokens: usize,
    /// Gaps longer than `STALL` between two arrivals.
    pub stalls: u32,
    last: Option<Instant>,
}

impl Arrivals {
    /// `tokens` tokens arrived now, for a request sent at `sent`.
    pub(super) fn arrived(&mut self, sent: Instant, tokens: usize) {
        let now = Instant::now();
        if tokens > 0 && self.first_token.is_none() {
            self.first_token = Some(now - sent);
        }
        if let Some(last) = self.last
            && now - last > STALL
        {
            self.stalls += 1;
        }
        self.last = Some(now);
        self.tokens += tokens;
    }
}

/// A direct call to the fake over HTTP: the same request agentwire makes, its answer read to the
/// end, a stream's tokens counted as they arrive.
pub(super) async fn call_directly(
    client: &reqwest::Client,
    url: &str,
    body: Bytes,
    tokens: usize,
    streamed: bool,
) -> Result<Arrivals, String> {
    let sent = Instant::now();
    let response = client
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|error| format!("the fake provider: {error}"))?;
    if !response.status().is_success() {
        return Err(format!("the fake provider answered {}", response.status()));
    }
    if !streamed {
        let answer =
            response.bytes().await.map_err(|error| format!("the fake provider's answer: {error}"))?;
        let counted = format!("\"completion_tokens\":{tokens}");
        return match answer.windows(counted.len()).any(|window| window == counted.as_bytes()) {
            true => Ok(Arrivals::default()),
            false => Err(format!("the fake provider's answer is not of {tokens} tokens")),
        };
    }
    let mut frames = response.bytes_stream();
    let mut arrivals = Arrivals::default();
    // Tokens are counted by their events' openings; one may straddle two frames, so the tail
    // of each frame is kept for the next.
    const OPENING: &[u8] = b"\"delta\":{\"content\"";
    let mut carried: Vec<u8> = Vec::new();
    while let Some(frame) = frames.next().await {
        let frame = frame.map_err(|error| format!("the fake provider's stream: {error}"))?;
        carried.extend_from_slice(&frame);
        let found = carried.windows(OPENING.len()).filter(|window| *window == OPENING).count();
        let keep = carried.len().min(OPENING.len() - 1);
        carried.drain(..carried.len() - keep);
        arrivals.arrived(sent, found);
    }
    if arrivals.tokens == tokens {
        Ok(arrivals)
    } else {
        Err(format!("the fake provider streamed {} tokens, not {tokens}", arrivals.tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fake streams every token, then the finish reason, the usage and `[DONE]`, as
    /// OpenAI does; a direct client counts every token, and an answer not streamed is whole.
    #[tokio::test]
    async fn the_fake_streams_the_tokens_its_model_names() {
        let url = format!("{}/chat/completions", start().await.unwrap());
        let client = reqwest::Client::new();
        let arrivals =
            call_directly(&client, &url, request_body(&model(200), "hi", true), 200, true).await.unwrap();
        assert_eq!(arrivals.tokens, 200);
        assert!(arrivals.first_token.is_some());
        call_directly(&client, &url, request_body(&model(20), "hi", false), 20, false).await.unwrap();
        let whole = client.post(&url).body(request_body(&model(3), "hi", true)).send().await.unwrap();
        let text = whole.text().await.unwrap();
        assert!(text.contains(r#""content":" w2""#) && text.contains(r#""finish_reason":"stop""#));
        assert!(text.contains(r#""completion_tokens":3"#) && text.ends_with("data: [DONE]\n\n"));
        let refused = client.post(&url).body("{}").send().await.unwrap();
        assert_eq!(refused.status(), 400);
    }
}
