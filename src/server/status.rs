//! Errors to `Status`, in one exhaustive match: a new error variant does not compile until
//! someone picks its gRPC code.

use tonic::{Code, Status};

use super::auth::AuthError;
use super::limits::LimitError;
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
        Status::new(code, error.to_string())
    }
}

impl From<StoreError> for Status {
    fn from(error: StoreError) -> Status {
        Status::new(store_code(&error), error.to_string())
    }
}

impl From<LimitError> for Status {
    fn from(error: LimitError) -> Status {
        Status::new(Code::ResourceExhausted, error.to_string())
    }
}

impl From<AuthError> for Status {
    fn from(error: AuthError) -> Status {
        let code = match &error {
            AuthError::Unauthenticated(_) => Code::Unauthenticated,
            AuthError::Forbidden { .. } | AuthError::NotAdmin(_) => Code::PermissionDenied,
            AuthError::Limited(_) => Code::ResourceExhausted,
        };
        Status::new(code, error.to_string())
    }
}

impl From<TokenError> for Status {
    fn from(error: TokenError) -> Status {
        let code = match &error {
            TokenError::MissingToken | TokenError::InvalidToken => Code::Unauthenticated,
            TokenError::NotAllowed(_) => Code::PermissionDenied,
        };
        Status::new(code, error.to_string())
    }
}

impl From<EmbedError> for Status {
    fn from(error: EmbedError) -> Status {
        let code = match &error {
            EmbedError::Failed { .. } => Code::Unavailable,
        };
        Status::new(code, error.to_string())
    }
}

fn store_code(error: &StoreError) -> Code {
    match error {
        StoreError::ThreadNotFound(_) => Code::NotFound,
        StoreError::ThreadOwnedElsewhere { .. } | StoreError::EmbedderMismatch { .. } => {
            Code::FailedPrecondition
        }
        StoreError::ThreadExists(_) => Code::AlreadyExists,
        StoreError::VersionConflict { .. } => Code::Aborted,
        StoreError::UnsupportedFormat { .. } | StoreError::Corrupt { .. } | StoreError::Engine(_) => {
            Code::Internal
        }
    }
}
