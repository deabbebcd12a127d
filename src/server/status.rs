//! Errors to `Status`, in one exhaustive match: a new error variant does not compile until
//! someone picks its gRPC code. Messages are cut to [`MAX_MESSAGE_BYTES`]: they may echo what the
//! caller sent (an id, a name), and a long one would push the status past the client's header
//! limit and turn into another error.

use tonic::{Code, Status};

use super::auth::AuthError;
use super::limits::LimitError;
use crate::domain::TooLarge;
use crate::memory::embedder::EmbedError;
use crate::remote::TokenError;
use crate::runtime::RunError;
use crate::storage::StoreError;

impl From<RunError> for Status {
    fn from(error: RunError) -> Status {
        let code = match &error {
            RunError::AgentNotFound(_) => Code::NotFound,
            RunError::InvalidArgument { .. } => Code::InvalidArgument,
            RunError::TooLarge { .. } => Code::ResourceExhausted,
            RunError::Store(store_error) => store_code(store_error),
            RunError::ShuttingDown => Code::Unavailable,
        };
        status(code, error.to_string())
    }
}

impl From<StoreError> for Status {
    fn from(error: StoreError) -> Status {
        status(store_code(&error), error.to_string())
    }
}

impl From<TooLarge> for Status {
    fn from(error: TooLarge) -> Status {
        status(Code::ResourceExhausted, error.to_string())
    }
}

impl From<LimitError> for Status {
    fn from(error: LimitError) -> Status {
        status(Code::ResourceExhausted, error.to_string())
    }
}

impl From<AuthError> for Status {
    fn from(error: AuthError) -> Status {
        let code = match &error {
            AuthError::Unauthenticated(_) => Code::Unauthenticated,
            AuthError::Forbidden { .. } | AuthError::NotAdmin(_) => Code::PermissionDenied,
            AuthError::Limited(_) => Code::ResourceExhausted,
        };
        status(code, error.to_string())
    }
}

impl From<TokenError> for Status {
    fn from(error: TokenError) -> Status {
        let code = match &error {
            TokenError::MissingToken | TokenError::InvalidToken => Code::Unauthenticated,
            TokenError::NotAllowed(_) => Code::PermissionDenied,
        };
        status(code, error.to_string())
    }
}

impl From<EmbedError> for Status {
    fn from(error: EmbedError) -> Status {
        let code = match &error {
            EmbedError::Failed { .. } => Code::Unavailable,
        };
        status(code, error.to_string())
    }
}

fn store_code(error: &StoreError) -> Code {
    match error {
        StoreError::ThreadNotFound(_) => Code::NotFound,
        StoreError::EmbedderMismatch { .. } => Code::FailedPrecondition,
        StoreError::ThreadExists(_) => Code::AlreadyExists,
        StoreError::VersionConflict { .. } => Code::Aborted,
        StoreError::DiskLow { .. } | StoreError::Unavailable(_) | StoreError::OutOfSpace(_) => {
            Code::Unavailable
        }
        StoreError::QuotaExceeded { .. } | StoreError::AllowanceExceeded { .. } => Code::ResourceExhausted,
        StoreError::UnsupportedFormat { .. }
        | StoreError::SchemaTooNew { .. }
        | StoreError::Corrupt { .. }
        | StoreError::Engine(_) => Code::Internal,
    }
}

/// The longest status message sent; longer ones are cut, saying by how much.
pub(super) const MAX_MESSAGE_BYTES: usize = 1024;

/// A status whose message is at most [`MAX_MESSAGE_BYTES`] (cut on a character boundary).
pub(super) fn status(code: Code, message: String) -> Status {
    if message.len() <= MAX_MESSAGE_BYTES {
        return Status::new(code, message);
    }
    let mut end = MAX_MESSAGE_BYTES - 64;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    Status::new(code, format!("{}… ({} more bytes)", &message[..end], message.len() - end))
}
