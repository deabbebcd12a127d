//! A warning: what a processor found worth telling but not worth stopping the run for (a `warn`
//! strategy's finding — PII, a suspected injection, a language not allowed — or a judge that
//! failed open). It streams as a transient `data-<kind>` chunk and stays in the run's record.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One warning of a hook call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// What was found, as a `data-` chunk name without its prefix (`pii`, `prompt-injection`).
    pub kind: String,
    /// For a person reading the run.
    pub message: String,
    /// For a program: the data of the chunk the warning streams as.
    pub details: Value,
}

impl Warning {
    /// A warning of `kind`.
    pub fn new(kind: impl Into<String>, message: impl Into<String>, details: Value) -> Warning {
        Warning { kind: kind.into(), message: message.into(), details }
    }
}
