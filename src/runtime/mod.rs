//! The agent loop.
//!
//! A [`Runtime`] holds the configured agents. [`Runtime::prepare`] checks a [`RunRequest`]
//! (unknown agent, missing input, unknown processor: refused before anything runs), and
//! [`PreparedRun::execute`] drives the run:
//!
//! ```text
//! processInput → for each step: processInputStep → processLLMRequest → model call
//!   (processAPIError on a rejection) → processOutputStream per chunk → processLLMResponse
//!   → processOutputStep → tools → processToolResult → … → processOutputResult → finish
//! ```
//!
//! Chunks go to a [`ChunkSink`] as they happen; the loop never knows about gRPC.

mod agent;
mod chunk;
mod message;
mod message_list;
mod request;
mod result;
mod run;
mod sink;
mod step;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use self::agent::{Agent, NamedProcessor};
pub use self::chunk::{
    Chunk, DATA_PREFIX, DataChunk, ErrorSource, FinishReason, RunFailure, Tripwire, Usage,
};
pub use self::message::{Message, Part, Role, ToolCall, ToolResult, new_id, now_millis};
pub use self::message_list::{MessageList, MessageSource, ReconcileScope};
pub use self::request::{RunError, RunRequest};
pub use self::result::RunResult;
pub use self::run::{PreparedRun, RETRY_FEEDBACK_TAG};
pub use self::sink::{ChunkSink, ClientGone};
pub use self::step::{StepInput, StepResult};
use toml::Spanned;

use crate::config::{AgentConfig, Config, ConfigError};
use crate::model::ModelRegistry;
use crate::processor::{Processor, ProcessorRegistry};
use crate::tool::ToolRegistry;

/// The most steps a run may ask for.
pub const MAX_STEPS_LIMIT: u32 = 100;

/// The agents, the processors they can name, the tools and the models.
#[derive(Debug)]
pub struct Runtime {
    agents: BTreeMap<String, Arc<Agent>>,
    /// Processor definitions of the config, by name.
    definitions: BTreeMap<String, Arc<dyn Processor>>,
    processor_kinds: ProcessorRegistry,
    tools: ToolRegistry,
    models: ModelRegistry,
}

impl Runtime {
    /// Builds the runtime from a config, checking every name the agents use.
    pub fn new(
        config: &Config,
        processor_kinds: ProcessorRegistry,
        tools: ToolRegistry,
        models: ModelRegistry,
    ) -> Result<Runtime, ConfigError> {
        let mut runtime =
            Runtime { agents: BTreeMap::new(), definitions: BTreeMap::new(), processor_kinds, tools, models };
        for (name, definition) in &config.processors {
            let offset = definition.span().start;
            let mut options = definition.get_ref().clone();
            let kind = match options.remove("kind") {
                Some(toml::Value::String(kind)) => kind,
                Some(_) => {
                    let message = format!("processors.{name}.kind must be a string");
                    return Err(config.invalid_at(offset, message));
                }
                None => {
                    let message = format!("processors.{name}.kind is required");
                    return Err(config.invalid_at(offset, message));
                }
            };
            let processor = runtime
                .processor_kinds
                .build(&kind, name, options)
                .map_err(|reason| config.invalid_at(offset, format!("processors.{name}: {reason}")))?;
            runtime.definitions.insert(name.clone(), processor);
        }
        for (index, agent) in config.agents.iter().enumerate() {
            let offset = agent.span().start;
            let resolved = runtime.resolve_agent(agent.get_ref()).map_err(|(key_offset, reason)| {
                config.invalid_at(key_offset.unwrap_or(offset), format!("agents[{index}].{reason}"))
            })?;
            if runtime.agents.contains_key(&resolved.id) {
                let message = format!("agents[{index}].id: duplicate agent id `{}`", resolved.id);
                return Err(config.invalid_at(offset, message));
            }
            runtime.agents.insert(resolved.id.clone(), Arc::new(resolved));
        }
        Ok(runtime)
    }

    /// The agents, ordered by id.
    pub fn agents(&self) -> impl Iterator<Item = &Arc<Agent>> {
        self.agents.values()
    }

    /// The agent with this id.
    pub fn agent(&self, agent_id: &str) -> Option<&Arc<Agent>> {
        self.agents.get(agent_id)
    }

    /// Checks a request and readies its run. Nothing runs yet.
    pub fn prepare(self: &Arc<Self>, request: RunRequest) -> Result<PreparedRun, RunError> {
        if request.agent_id.is_empty() {
            return Err(RunError::invalid("agent_id", "is required"));
        }
        let Some(agent) = self.agents.get(&request.agent_id) else {
            return Err(RunError::AgentNotFound(request.agent_id));
        };
        if request.messages.is_empty() {
            return Err(RunError::invalid("text", "one of `text` or `messages` is required"));
        }
        if let Some(max_steps) = request.max_steps
            && !(1..=MAX_STEPS_LIMIT).contains(&max_steps)
        {
            return Err(RunError::invalid(
                "max_steps",
                format!("must be between 1 and {MAX_STEPS_LIMIT}, got {max_steps}"),
            ));
        }
        let input =
            self.override_or(&request.input_processors, &agent.input_processors, "input_processors")?;
        let output =
            self.override_or(&request.output_processors, &agent.output_processors, "output_processors")?;
        let error =
            self.override_or(&request.error_processors, &agent.error_processors, "error_processors")?;
        Ok(PreparedRun::new(Arc::clone(self), Arc::clone(agent), request, [input, output, error]))
    }

    /// The processor a name stands for: a definition of the config, or a built-in kind with
    /// its default options (the kind's name is then its id).
    fn processor_by_name(&self, name: &str) -> Result<Arc<dyn Processor>, String> {
        if let Some(processor) = self.definitions.get(name) {
            return Ok(Arc::clone(processor));
        }
        if !self.processor_kinds.has_kind(name) {
            return Err(format!(
                "unknown processor `{name}` (not a `[processors.*]` definition nor a built-in kind)"
            ));
        }
        self.processor_kinds.build(name, name, toml::Table::new()).map_err(|reason| {
            format!("processor kind `{name}` needs a `[processors.*]` definition: {reason}")
        })
    }

    /// The processors for a list of names. The error is the offending field and the reason.
    fn named_processors(
        &self,
        names: &[String],
        field: &str,
    ) -> Result<Vec<NamedProcessor>, (String, String)> {
        let mut processors = Vec::with_capacity(names.len());
        for (index, name) in names.iter().enumerate() {
            let processor =
                self.processor_by_name(name).map_err(|reason| (format!("{field}[{index}]"), reason))?;
            processors.push(NamedProcessor { name: name.clone(), processor });
        }
        Ok(processors)
    }

    fn override_or(
        &self,
        names: &Option<Vec<String>>,
        configured: &[NamedProcessor],
        field: &str,
    ) -> Result<Vec<Arc<dyn Processor>>, RunError> {
        let processors = match names {
            Some(names) => self
                .named_processors(names, &format!("{field}.names"))
                .map_err(|(field, reason)| RunError::invalid(field, reason))?,
            None => configured.to_vec(),
        };
        Ok(processors.into_iter().map(|named| named.processor).collect())
    }

    /// Resolves an agent's names. The error holds the offending key's offset (when it has one)
    /// and a message that starts with the key.
    fn resolve_agent(&self, config: &AgentConfig) -> Result<Agent, (Option<usize>, String)> {
        // Defaulted values have an empty span: they are reported at the agent's table.
        let at = |span: std::ops::Range<usize>, message: String| {
            ((!span.is_empty()).then_some(span.start), message)
        };
        if config.id.is_empty() {
            return Err((None, "id: must not be empty".to_owned()));
        }
        let max_steps = *config.max_steps.get_ref();
        if !(1..=MAX_STEPS_LIMIT).contains(&max_steps) {
            let message = format!("max_steps: must be between 1 and {MAX_STEPS_LIMIT}, got {max_steps}");
            return Err(at(config.max_steps.span(), message));
        }
        let script = config.script.as_ref().map(|script| Arc::new(script.get_ref().clone()));
        if let (Some(spanned), Some(script)) = (&config.script, &script)
            && script.replies.is_empty()
        {
            return Err(at(spanned.span(), "script: must hold at least one reply".to_owned()));
        }
        self.models
            .resolve(config.model.get_ref(), script.as_ref())
            .map_err(|error| at(config.model.span(), format!("model: {error}")))?;
        let mut tools = Vec::with_capacity(config.tools.get_ref().len());
        for (index, name) in config.tools.get_ref().iter().enumerate() {
            let Some(tool) = self.tools.get(name) else {
                let known: Vec<&str> = self.tools.names().collect();
                let message =
                    format!("tools[{index}]: unknown tool `{name}` (known tools: {})", known.join(", "));
                return Err(at(config.tools.span(), message));
            };
            tools.push(tool.definition());
        }
        let processors = |names: &Spanned<Vec<String>>, field: &str| {
            self.named_processors(names.get_ref(), field)
                .map_err(|(field, reason)| at(names.span(), format!("{field}: {reason}")))
        };
        Ok(Agent {
            id: config.id.clone(),
            name: config.name.clone().unwrap_or_else(|| config.id.clone()),
            instructions: config.instructions.clone(),
            model: config.model.get_ref().clone(),
            tools,
            input_processors: processors(&config.input_processors, "input_processors")?,
            output_processors: processors(&config.output_processors, "output_processors")?,
            error_processors: processors(&config.error_processors, "error_processors")?,
            max_processor_retries: config.max_processor_retries,
            max_steps,
            settings: config.settings.clone(),
            script,
        })
    }
}
