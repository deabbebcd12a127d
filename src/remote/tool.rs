//! Remote tools: executed by processes in any language connected over
//! `ProcessorService.Connect` (the same stream as remote processors), which register each tool
//! with its name, description and argument schema. The config declares the tools agents may use:
//!
//! ```toml
//! [tools.weather]
//! kind = "remote"
//! server = "tool-server"   # the processor id the instances connect as (default: the tool name)
//! timeout_ms = 5000
//! ```
//!
//! A step offers the tool only while an instance serves it. Arguments are checked against the
//! instance's schema first; calls go to the least loaded instance and move to another once if it
//! goes away; a missing, failing or slow tool is a tool error the model sees, never a failed run.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::pool::RemotePool;
use super::session::{CallFailure, Session};
use super::tool_call::ToolInvocation;
use crate::config::RemoteToolConfig;
use crate::domain::{ToolDefinition, now_millis};
use crate::telemetry::propagation;
use crate::tool::{Tool, ToolCallInfo, ToolError};

/// Why a `[tools.<name>]` table does not make a tool. The config is at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolConfigError {
    /// Only remote tools can be declared.
    #[error("`kind` must be \"remote\", got \"{0}\"")]
    Kind(String),
    /// A call needs time to be answered.
    #[error("`timeout_ms` must be positive")]
    ZeroTimeout,
}

/// A tool executed by connected instances.
pub struct RemoteTool {
    name: String,
    server: String,
    timeout: Duration,
    pool: Arc<RemotePool>,
}

impl RemoteTool {
    /// Tool `name` from its table; registers its server id with the pool.
    pub fn new(
        name: &str,
        config: &RemoteToolConfig,
        pool: &Arc<RemotePool>,
    ) -> Result<RemoteTool, ToolConfigError> {
        if config.kind != "remote" {
            return Err(ToolConfigError::Kind(config.kind.clone()));
        }
        let timeout_ms = config.timeout_ms.unwrap_or(10_000);
        if timeout_ms == 0 {
            return Err(ToolConfigError::ZeroTimeout);
        }
        let server = config.server.clone().unwrap_or_else(|| name.to_owned());
        pool.expect(&server);
        Ok(RemoteTool {
            name: name.to_owned(),
            server,
            timeout: Duration::from_millis(timeout_ms),
            pool: Arc::clone(pool),
        })
    }

    /// A connected instance serving the tool, to read its description and schema. Not a pick:
    /// reading must not turn the pool's rotation.
    fn served_by(&self) -> Option<Arc<Session>> {
        if self.pool.is_draining() {
            return None;
        }
        self.pool.sessions(&self.server).into_iter().find(|session| session.tool(&self.name).is_some())
    }

    fn failed(&self, reason: impl Into<String>) -> ToolError {
        ToolError::Failed { tool: self.name.clone(), reason: reason.into() }
    }
}

#[async_trait::async_trait]
impl Tool for RemoteTool {
    fn definition(&self) -> ToolDefinition {
        let session = self.served_by();
        match session.as_ref().and_then(|session| session.tool(&self.name)) {
            Some(spec) => ToolDefinition {
                name: self.name.clone(),
                description: spec.description.clone(),
                parameters: spec.parameters.schema().clone(),
            },
            None => ToolDefinition {
                name: self.name.clone(),
                description: "(unavailable: no instance connected)".to_owned(),
                parameters: json!({ "type": "object" }),
            },
        }
    }

    fn available(&self) -> bool {
        self.served_by().is_some()
    }

    async fn execute(&self, args: Value, call: ToolCallInfo<'_>) -> Result<Value, ToolError> {
        let deadline_unix_ms = now_millis() + i64::try_from(self.timeout.as_millis()).unwrap_or(i64::MAX);
        let mut failed = None;
        loop {
            let Some(session) = self.pool.pick_tool(&self.server, &self.name, failed.as_ref()) else {
                return Err(self.failed(if failed.is_some() {
                    "its instance disconnected before answering"
                } else {
                    "unavailable (no instance connected)"
                }));
            };
            if let Some(spec) = session.tool(&self.name) {
                spec.parameters.check(&args).map_err(|reason| ToolError::InvalidArguments {
                    tool: self.name.clone(),
                    reason: reason.to_string(),
                })?;
            }
            let request = ToolInvocation {
                call_id: 0,
                run_id: call.run_id.to_owned(),
                agent_id: call.agent_id.to_owned(),
                tool_call_id: call.tool_call_id.to_owned(),
                tool_name: self.name.clone(),
                args: args.clone(),
                deadline_unix_ms,
                trace_context: propagation::outgoing(call.trace_context),
            };
            match tokio::time::timeout(self.timeout, session.call_tool(request)).await {
                Ok(Ok(reply)) => return reply.result.map_err(|reason| self.failed(reason)),
                Ok(Err(CallFailure::Gone)) if failed.is_none() => failed = Some(session),
                Ok(Err(CallFailure::Gone)) => {
                    return Err(self.failed("its instance disconnected before answering"));
                }
                Ok(Err(CallFailure::Mismatched)) => {
                    return Err(self.failed("its instance answered with a hook result"));
                }
                Err(_) => {
                    session.record_error();
                    return Err(self.failed(format!("timed out after {} ms", self.timeout.as_millis())));
                }
            }
        }
    }
}
