//! HTTP model providers: any OpenAI-compatible chat completions endpoint and Anthropic's
//! Messages API, streamed over server-sent events — or, when nobody watches the answer as it
//! comes (a `Generate` without a stream processor), answered in one piece: one response to read
//! rather than an event per token.
//!
//! Model ids are `<provider>/<model>`. Built in: `openai/…` (`OPENAI_API_KEY`), `anthropic/…`
//! (`ANTHROPIC_API_KEY`) and `ollama/…` (OpenAI-compatible at `http://localhost:11434/v1`, no
//! key); `[providers.<name>]` in the config adds providers or overrides these. Keys are read from
//! environment variables, never from the config file, and never logged.
//!
//! A call is retried on 429 and 5xx (honouring `Retry-After`, bounded); any other refusal is a
//! [`ModelError::Rejected`] for the error processors. A stream silent for longer than the read
//! timeout ends with [`ModelError::Stalled`]. Dropping the stream (a cancelled run) drops the
//! HTTP request.

mod anthropic;
mod decode;
mod openai;
mod sse;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use self::anthropic::AnthropicDecoder;
use self::decode::{Decoded, Decoder};
use self::openai::OpenAiDecoder;
use self::sse::SseParser;
use super::{LanguageModel, ModelError, ModelEvent, ModelRequest, ModelStream};
use crate::config::{Api, ProviderConfig};

/// Why a `[providers.<name>]` table does not make a provider. The config is at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// A provider that is not built in must say where it lives.
    #[error("`base_url` is required for a provider that is not built in")]
    MissingBaseUrl,
    /// The base URL is not an http(s) URL.
    #[error("`base_url` must be an http(s) URL, got `{0}`")]
    BadBaseUrl(String),
    /// A header of `headers` is not one HTTP allows.
    #[error("`headers.{0}` is not a valid HTTP header (name or value)")]
    BadHeader(String),
}

/// The longest `Retry-After` a call waits for; a longer one fails the call at once.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Idle connections a provider keeps for the next calls unless `max_idle_connections` says
/// otherwise: a burst of 512 streams would otherwise leave 512 of them open, ~60 KB each, for the
/// pool's 90 s (httpx keeps 20, Go's transport 2 a host).
const DEFAULT_MAX_IDLE_CONNECTIONS: usize = 64;

/// A provider: where it lives, how to authenticate, how patient to be.
pub struct Provider {
    name: String,
    api: Api,
    base_url: String,
    /// Where every call goes (`{base_url}/chat/completions`, `{base_url}/messages`), parsed once.
    endpoint: reqwest::Url,
    api_key: Option<String>,
    api_key_env: Option<String>,
    /// The headers of every call besides the key's: the table's, and the API's version.
    headers: HeaderMap,
    read_timeout: Duration,
    answer_timeout: Duration,
    max_retries: u32,
    connect_timeout: Duration,
    max_idle_connections: usize,
    /// Built at the first call: building one loads the TLS roots, which takes milliseconds, and
    /// most configured providers are never called.
    client: std::sync::OnceLock<reqwest::Client>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        formatter
            .debug_struct("Provider")
            .field("name", &self.name)
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl Provider {
    /// The defaults of a built-in provider name, if it is one.
    fn builtin(name: &str) -> Option<(Api, &'static str, Option<&'static str>)> {
        match name {
            "openai" => Some((Api::OpenAi, "https://api.openai.com/v1", Some("OPENAI_API_KEY"))),
            "anthropic" => Some((Api::Anthropic, "https://api.anthropic.com/v1", Some("ANTHROPIC_API_KEY"))),
            "ollama" => Some((Api::OpenAi, "http://localhost:11434/v1", None)),
            _ => None,
        }
    }

    /// Builds provider `name` from its table (over the built-in defaults for that name). Reads the
    /// key from its environment variable now; a missing key is reported when a call needs it.
    pub fn new(name: &str, config: &ProviderConfig) -> Result<Provider, ProviderError> {
        let builtin = Provider::builtin(name);
        let api = config.api.or(builtin.map(|(api, ..)| api)).unwrap_or(Api::OpenAi);
        let base_url = match (&config.base_url, builtin) {
            (Some(url), _) => url.clone(),
            (None, Some((_, url, _))) => url.to_owned(),
            (None, None) => {
                return Err(ProviderError::MissingBaseUrl);
            }
        };
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(ProviderError::BadBaseUrl(base_url));
        }
        let base_url = base_url.trim_end_matches('/').to_owned();
        let path = match api {
            Api::OpenAi => "chat/completions",
            Api::Anthropic => "messages",
        };
        let endpoint = reqwest::Url::parse(&format!("{base_url}/{path}"))
            .map_err(|_| ProviderError::BadBaseUrl(base_url.clone()))?;
        let mut headers = HeaderMap::new();
        if api == Api::Anthropic {
            headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        }
        for (name, value) in &config.headers {
            let header = HeaderName::from_bytes(name.as_bytes()).ok().zip(HeaderValue::from_str(value).ok());
            let (name, value) = header.ok_or_else(|| ProviderError::BadHeader(name.clone()))?;
            headers.append(name, value);
        }
        let api_key_env = config.api_key_env.clone().or(builtin.and_then(|(.., key)| key.map(str::to_owned)));
        let api_key = api_key_env.as_deref().and_then(|variable| std::env::var(variable).ok());
        Ok(Provider {
            name: name.to_owned(),
            api,
            base_url,
            endpoint,
            api_key,
            api_key_env,
            headers,
            read_timeout: Duration::from_millis(config.read_timeout_ms.unwrap_or(60_000)),
            answer_timeout: Duration::from_millis(config.answer_timeout_ms.unwrap_or(600_000)),
            max_retries: config.max_retries.unwrap_or(2),
            connect_timeout: Duration::from_millis(config.connect_timeout_ms.unwrap_or(10_000)),
            max_idle_connections: config.max_idle_connections.unwrap_or(DEFAULT_MAX_IDLE_CONNECTIONS),
            client: std::sync::OnceLock::new(),
        })
    }

    /// The built-in providers with their defaults.
    pub fn builtins() -> Vec<Provider> {
        ["openai", "anthropic", "ollama"]
            .into_iter()
            .map(|name| {
                Provider::new(name, &ProviderConfig::default()).expect("built-in providers are valid")
            })
            .collect()
    }

    /// The provider's name (the part of a model id before `/`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The HTTP client, built at the first call.
    fn client(&self, model_id: &str) -> Result<&reqwest::Client, ModelError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .pool_max_idle_per_host(self.max_idle_connections)
            // A provider's redirect is a misconfigured `base_url`, and following one would send
            // the key to another host (`x-api-key` is not among the headers a redirect drops).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| ModelError::Unavailable {
                model: model_id.to_owned(),
                message: format!("cannot build the HTTP client: {error}"),
            })?;
        Ok(self.client.get_or_init(|| client))
    }

    fn request(&self, model_id: &str, body: &Value) -> Result<reqwest::RequestBuilder, ModelError> {
        let mut request =
            self.client(model_id)?.post(self.endpoint.clone()).headers(self.headers.clone()).json(body);
        match (&self.api_key, &self.api_key_env, self.api) {
            (Some(key), _, Api::OpenAi) => request = request.bearer_auth(key),
            (Some(key), _, Api::Anthropic) => request = request.header("x-api-key", key),
            (None, Some(variable), _) => {
                return Err(ModelError::Unavailable {
                    model: model_id.to_owned(),
                    message: format!("`{variable}` is not set (the key of provider `{}`)", self.name),
                });
            }
            (None, None, _) => {}
        }
        Ok(request)
    }

    /// Sends the request, retrying 429s, 5xx and failed connections; the response of a call
    /// that was accepted. `patience`: how long the provider may take to start answering.
    async fn send(
        &self,
        model_id: &str,
        body: &Value,
        patience: Duration,
    ) -> Result<reqwest::Response, ModelError> {
        let mut attempt = 0;
        loop {
            let request = self.request(model_id, body)?;
            let outcome = tokio::time::timeout(patience, request.send()).await;
            let retry_after = match outcome {
                Err(_) => {
                    return Err(ModelError::Stalled {
                        model: model_id.to_owned(),
                        after_ms: duration_ms(patience),
                    });
                }
                Ok(Err(error)) if attempt >= self.max_retries => {
                    return Err(ModelError::Unavailable {
                        model: model_id.to_owned(),
                        message: format!("provider `{}`: {error}", self.name),
                    });
                }
                Ok(Err(_)) => None,
                Ok(Ok(response)) if response.status().is_success() => return Ok(response),
                Ok(Ok(response)) => {
                    let status = response.status();
                    let retryable = status.as_u16() == 429 || status.is_server_error();
                    let retry_after = retry_after(&response);
                    if !retryable || attempt >= self.max_retries || retry_after > Some(MAX_RETRY_AFTER) {
                        let message = error_message(response).await;
                        return Err(ModelError::Rejected {
                            model: model_id.to_owned(),
                            status: status.as_u16(),
                            message: format!("provider `{}`: {message}", self.name),
                        });
                    }
                    retry_after
                }
            };
            // Retry-After when the provider says, else exponential backoff: 0.5 s, 1 s, 2 s…
            let backoff = retry_after.unwrap_or(Duration::from_millis(500 << attempt.min(6)));
            tracing::warn!(provider = %self.name, model = model_id, attempt, ?backoff, "model call retried");
            tokio::time::sleep(backoff).await;
            attempt += 1;
        }
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// `Retry-After` as seconds or as an HTTP date (RFC 9110; a date already past means now).
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let value = response.headers().get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
}

/// The provider's error message from an error response (its JSON `error.message`, else the
/// body's start); for a redirect, where it points.
async fn error_message(response: reqwest::Response) -> String {
    let status = response.status();
    if status.is_redirection() {
        let location =
            response.headers().get(reqwest::header::LOCATION).and_then(|value| value.to_str().ok());
        return format!(
            "{status}: redirects to `{}`, which is not followed; set the provider's base_url to where it answers",
            location.unwrap_or("nowhere")
        );
    }
    let body = response.text().await.unwrap_or_default();
    let from_json = serde_json::from_str::<Value>(&body).ok().and_then(|json| {
        json.pointer("/error/message")
            .or_else(|| json.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let message = from_json.unwrap_or_else(|| body.chars().take(300).collect());
    format!("{status}: {message}")
}

/// A model of a provider: `<provider>/<model>`.
#[derive(Debug)]
pub struct HttpModel {
    id: String,
    model: String,
    provider: Arc<Provider>,
}

impl HttpModel {
    /// `model` of `provider`.
    pub fn new(provider: Arc<Provider>, model: &str) -> HttpModel {
        HttpModel { id: format!("{}/{model}", provider.name), model: model.to_owned(), provider }
    }
}

/// Where a streamed answer is.
struct Streaming {
    bytes: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    parser: SseParser,
    decoder: Box<dyn Decoder>,
    ready: VecDeque<Result<ModelEvent, ModelError>>,
    done: bool,
    model_id: String,
    provider: String,
    read_timeout: Duration,
}

impl Streaming {
    /// Decodes events until some are ready or the stream is over.
    async fn fill(&mut self) {
        while self.ready.is_empty() && !self.done {
            match tokio::time::timeout(self.read_timeout, self.bytes.next()).await {
                Err(_) => self.fail(ModelError::Stalled {
                    model: self.model_id.clone(),
                    after_ms: duration_ms(self.read_timeout),
                }),
                Ok(Some(Ok(bytes))) => {
                    let events = self.parser.feed(&bytes);
                    self.decode(events);
                }
                Ok(Some(Err(error))) => {
                    let message = format!("provider `{}`: the stream broke: {error}", self.provider);
                    self.fail(ModelError::Unavailable { model: self.model_id.clone(), message });
                }
                Ok(None) => {
                    let last = self.parser.finish();
                    self.decode(last.into_iter().collect());
                    if !self.done {
                        self.end();
                    }
                }
            }
        }
    }

    fn decode(&mut self, events: Vec<sse::SseEvent>) {
        for event in events {
            if self.done {
                return;
            }
            match self.decoder.event(event) {
                Decoded::Events(events) => self.ready.extend(events.into_iter().map(Ok)),
                Decoded::End => self.end(),
                Decoded::Failed(message) => {
                    let message = format!("provider `{}`: {message}", self.provider);
                    self.fail(ModelError::Unavailable { model: self.model_id.clone(), message });
                }
                Decoded::Malformed(reason) => {
                    let message = format!("provider `{}` sent a malformed stream: {reason}", self.provider);
                    self.fail(ModelError::Unavailable { model: self.model_id.clone(), message });
                }
            }
        }
    }

    fn end(&mut self) {
        self.ready.extend(self.decoder.end().into_iter().map(Ok));
        self.done = true;
    }

    fn fail(&mut self, error: ModelError) {
        self.ready.push_back(Err(error));
        self.done = true;
    }
}

impl HttpModel {
    /// A call answered in one piece, its events handed out as a stream would have.
    async fn answer_in_one_piece(&self, body: &Value) -> Result<ModelStream, ModelError> {
        let provider = &self.provider;
        let started = tokio::time::Instant::now();
        let response = provider.send(&self.id, body, provider.answer_timeout).await?;
        let left = provider.answer_timeout.saturating_sub(started.elapsed());
        let unavailable = |message: String| ModelError::Unavailable {
            model: self.id.clone(),
            message: format!("provider `{}`: {message}", provider.name),
        };
        let bytes = match tokio::time::timeout(left, response.bytes()).await {
            Err(_) => {
                return Err(ModelError::Stalled {
                    model: self.id.clone(),
                    after_ms: duration_ms(provider.answer_timeout),
                });
            }
            Ok(Err(error)) => return Err(unavailable(format!("the answer broke off: {error}"))),
            Ok(Ok(bytes)) => bytes,
        };
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|error| unavailable(format!("the answer is not JSON: {error}")))?;
        let events = match provider.api {
            Api::OpenAi => openai::answer(&answer),
            Api::Anthropic => anthropic::answer(&answer),
        }
        .map_err(unavailable)?;
        Ok(Box::pin(futures::stream::iter(events.into_iter().map(Ok))))
    }
}

#[async_trait::async_trait]
impl LanguageModel for HttpModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let (body, decoder): (Value, Box<dyn Decoder>) = match self.provider.api {
            Api::OpenAi => (openai::body(&self.model, &request), Box::new(OpenAiDecoder::default())),
            Api::Anthropic => (anthropic::body(&self.model, &request), Box::new(AnthropicDecoder::default())),
        };
        if !request.streamed {
            return self.answer_in_one_piece(&body).await;
        }
        let response = self.provider.send(&self.id, &body, self.provider.read_timeout).await?;
        let streaming = Streaming {
            bytes: response.bytes_stream().boxed(),
            parser: SseParser::default(),
            decoder,
            ready: VecDeque::new(),
            done: false,
            model_id: self.id.clone(),
            provider: self.provider.name.clone(),
            read_timeout: self.provider.read_timeout,
        };
        let events = futures::stream::unfold(streaming, |mut streaming| async move {
            streaming.fill().await;
            let event = streaming.ready.pop_front()?;
            Some((event, streaming))
        });
        Ok(Box::pin(events))
    }
}
