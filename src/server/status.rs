//! Errors to `Status`, in one exhaustive match: a new error variant does not compile until
//! someone picks its gRPC code.

use tonic::{Code, Status};

use crate::runtime::RunError;

impl From<RunError> for Status {
    fn from(error: RunError) -> Status {
        let code = match &error {
            RunError::AgentNotFound(_) => Code::NotFound,
            RunError::InvalidArgument { .. } => Code::InvalidArgument,
        };
        Status::new(code, error.to_string())
    }
}
