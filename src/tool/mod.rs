//! Tools the model can call: the [`Tool`] trait and the registry that agents pick from by name.
//!
//! A failing tool never fails the run: its error becomes a tool result marked `is_error`, which
//! the model sees on the next step.

mod calculator;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

pub use self::calculator::Calculator;
use crate::domain::ToolDefinition;

/// Why a tool call failed. Shown to the model as the tool's result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// The model passed arguments the tool cannot use.
    #[error("invalid arguments for tool `{tool}`: {reason}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What is wrong, naming the argument.
        reason: String,
    },
    /// The model called a tool that the step does not offer.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// The tool ran and failed.
    #[error("tool `{tool}` failed: {reason}")]
    Failed {
        /// The tool.
        tool: String,
        /// What went wrong.
        reason: String,
    },
}

/// The call a tool runs for.
#[derive(Debug, Clone, Copy)]
pub struct ToolCallInfo<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The agent.
    pub agent_id: &'a str,
    /// The model's id for the call.
    pub tool_call_id: &'a str,
    /// The caller's W3C trace context, as it came.
    pub trace_context: &'a crate::domain::TraceContext,
}

/// Something the model can call.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// How the model sees the tool: name, description, argument schema.
    fn definition(&self) -> ToolDefinition;

    /// False while the tool cannot run (a remote tool with no instance connected): steps do not
    /// offer it then.
    fn available(&self) -> bool {
        true
    }

    /// Runs the tool.
    async fn execute(&self, args: Value, call: ToolCallInfo<'_>) -> Result<Value, ToolError>;
}

impl std::fmt::Debug for dyn Tool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_tuple("Tool").field(&self.definition().name).finish()
    }
}

/// The tools known to the server, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// The registry with the built-in tools.
    pub fn with_builtins() -> ToolRegistry {
        let mut registry = ToolRegistry::default();
        registry.register(Arc::new(Calculator));
        registry
    }

    /// Adds a tool, replacing any tool of the same name.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.definition().name, tool);
    }

    /// Adds a tool under `name` (a remote tool's definition comes and goes with its instances).
    pub fn register_named(&mut self, name: &str, tool: Arc<dyn Tool>) {
        self.tools.insert(name.to_owned(), tool);
    }

    /// The tool with this name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// The names of every tool, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }
}
