//! The client's mistakes, named as the client's: a request body that does not decode is
//! INVALID_ARGUMENT (tonic says INTERNAL) and one over the size limit RESOURCE_EXHAUSTED (tonic
//! says OUT_OF_RANGE). tonic answers these before any handler runs, so a layer around every
//! service rewrites the status of such answers (tonic sends them trailers-only: the status is in
//! the headers), and every other answer passes untouched.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::Code;
use tonic::codegen::http::{HeaderMap, HeaderValue, Request, Response};

/// The prefixes of tonic's messages for request bodies that do not decode.
const UNDECODABLE: [&str; 3] = [
    "failed to decode Protobuf message",
    "protocol error: received message",
    "Unexpected EOF decoding stream",
];

/// The prefix of tonic's message for a request body over the size limit.
const TOO_LARGE: &str = "Error, decoded message length too large";

/// Wraps every service with [`ClientErrors`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ClientErrorsLayer;

impl<S> tower::Layer<S> for ClientErrorsLayer {
    type Service = ClientErrors<S>;

    fn layer(&self, inner: S) -> ClientErrors<S> {
        ClientErrors { inner }
    }
}

/// A service whose answers to undecodable or oversized requests carry the client's code.
#[derive(Debug, Clone)]
pub(super) struct ClientErrors<S> {
    inner: S,
}

impl<S, B, R> tower::Service<Request<B>> for ClientErrors<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let answer = self.inner.call(request);
        Box::pin(async move {
            let mut response = answer.await?;
            rename(response.headers_mut());
            Ok(response)
        })
    }
}

/// Rewrites the `grpc-status` of an answer to an undecodable or oversized request.
fn rename(headers: &mut HeaderMap) {
    let status =
        headers.get("grpc-status").and_then(|value| value.to_str().ok()).and_then(|value| value.parse().ok());
    let Some(status) = status.map(Code::from_i32) else { return };
    let message =
        headers.get("grpc-message").map(|value| percent_decoded(value.as_bytes())).unwrap_or_default();
    let renamed = match status {
        Code::Internal if UNDECODABLE.iter().any(|prefix| message.starts_with(prefix)) => {
            Code::InvalidArgument
        }
        Code::OutOfRange if message.starts_with(TOO_LARGE) => Code::ResourceExhausted,
        _ => return,
    };
    headers.insert("grpc-status", HeaderValue::from(renamed as i32));
}

/// A `grpc-message` as text: it travels percent-encoded (`failed%20to%20decode`).
fn percent_decoded(encoded: &[u8]) -> String {
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut rest = encoded;
    while let Some((&byte, tail)) = rest.split_first() {
        let hex = tail.get(..2).and_then(|pair| std::str::from_utf8(pair).ok());
        match (byte, hex.and_then(|pair| u8::from_str_radix(pair, 16).ok())) {
            (b'%', Some(decoded)) => {
                bytes.push(decoded);
                rest = &tail[2..];
            }
            _ => {
                bytes.push(byte);
                rest = tail;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Percent-encoded messages decode; a stray `%` stays as it is.
    #[test]
    fn grpc_messages_are_percent_decoded() {
        assert_eq!(percent_decoded(b"failed%20to%20decode: 100%"), "failed to decode: 100%");
        assert_eq!(percent_decoded(b"%E2%9C%93 ok%2"), "\u{2713} ok%2");
    }
}
