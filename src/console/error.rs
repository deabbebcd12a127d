//! What the console answers when a call fails: one enum, mapped to an HTTP status and a JSON body
//! `{"error": {"code": "INVALID_ARGUMENT", "message": "..."}}` in one place. A gRPC status keeps
//! its code's name, so a page reads the same error a gRPC client gets.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tonic::Code;

/// Why a console call failed.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// No such method among the agentwire services.
    #[error("no method `{0}`: the console offers the agentwire.v1 services' methods")]
    UnknownMethod(String),
    /// A client-streaming method, which needs gRPC itself.
    #[error("`{0}` streams from the client: call it over gRPC")]
    ClientStreaming(String),
    /// The body is not the method's request in JSON.
    #[error("the request body is not the method's request in JSON: {0}")]
    BadJson(String),
    /// A credential header that gRPC metadata cannot carry.
    #[error("the `{0}` header is not valid metadata")]
    BadHeader(&'static str),
    /// An API call without `content-type: application/json`.
    #[error("console API calls are POST with `content-type: application/json`")]
    NotJson,
    /// A request whose `Host` is not one of the console's names (DNS rebinding, or a name the
    /// operator has not listed).
    #[error(
        "the console does not answer to host `{0}`: list the names it is reached by in `[console] hosts`"
    )]
    UnknownHost(String),
    /// A call that changes state, on a server without API keys whose console did not opt in.
    #[error(
        "`{0}` changes state, and this server has no API keys: the console only reads. Add \
         `[[auth.keys]]` and sign in with one, or set `[console] allow_unauthenticated_writes = true`"
    )]
    WriteWithoutKey(String),
    /// The TLS certificate or key could not be used.
    #[error("console TLS: {0}")]
    Tls(String),
    /// The crate's descriptors did not load (a build problem).
    #[error("cannot read the service descriptors: {0}")]
    Descriptors(String),
    /// The method answered with an error.
    #[error("{}", .0.message())]
    Grpc(#[from] tonic::Status),
}

impl ConsoleError {
    /// The gRPC code this error reads as.
    fn code(&self) -> Code {
        match self {
            ConsoleError::UnknownMethod(_) => Code::NotFound,
            ConsoleError::UnknownHost(_) | ConsoleError::WriteWithoutKey(_) => Code::PermissionDenied,
            ConsoleError::ClientStreaming(_) => Code::Unimplemented,
            ConsoleError::BadJson(_) | ConsoleError::BadHeader(_) | ConsoleError::NotJson => {
                Code::InvalidArgument
            }
            ConsoleError::Descriptors(_) | ConsoleError::Tls(_) => Code::Internal,
            ConsoleError::Grpc(status) => status.code(),
        }
    }

    /// The JSON body: `{"error": {"code", "message"}}`.
    pub(super) fn body(&self) -> Vec<u8> {
        let error =
            serde_json::json!({ "error": { "code": code_name(self.code()), "message": self.to_string() } });
        error.to_string().into_bytes()
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let status = http_status(self.code());
        (status, [(axum::http::header::CONTENT_TYPE, "application/json")], self.body()).into_response()
    }
}

/// The HTTP status of a gRPC code (as gRPC-HTTP gateways map them).
fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::InvalidArgument | Code::OutOfRange | Code::FailedPrecondition => StatusCode::BAD_REQUEST,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A code's name as gRPC spells it (`INVALID_ARGUMENT`).
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
