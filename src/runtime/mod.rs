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
mod assembly;
mod lifecycle;
mod request;
mod resolve;
mod result;
mod run;
mod sink;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use self::agent::{Agent, NamedProcessor, ProcessorRef};
pub use self::lifecycle::ShutdownReport;
pub use self::request::{RunError, RunRequest};
pub use self::result::RunResult;
pub use self::run::{PreparedRun, RETRY_FEEDBACK_TAG};
pub use self::sink::{ChunkSink, ClientGone};
use crate::config::{Config, ConfigError};
use crate::domain::JsonSchema;
use crate::memory::embedder::{self, Embedders};
use crate::memory::{MemoryKind, MemoryProcessors};
use crate::model::ModelRegistry;
use crate::model::provider::Provider;
use crate::processor::{Processor, ProcessorRegistry, ProcessorResources};
use crate::remote::{self, PoolTiming, RemotePool, RemoteProcessor, RemoteTool};
use crate::storage::Store;
use crate::tool::ToolRegistry;

/// What a runtime is built from besides its config: the processor kinds, tools and models it
/// knows, and where memory is kept.
#[derive(Debug, Clone)]
pub struct Components {
    /// Processor kinds that configs may name.
    pub processor_kinds: ProcessorRegistry,
    /// Tools that agents may offer.
    pub tools: ToolRegistry,
    /// Model providers.
    pub models: ModelRegistry,
    /// Where memory lives; agents with a `memory` table need one.
    pub store: Option<Arc<dyn Store>>,
    /// The connected instances of remote processors.
    pub remote: Arc<RemotePool>,
}

impl Components {
    /// The built-in kinds, tools and models, and no store.
    pub fn builtin() -> Components {
        Components {
            processor_kinds: ProcessorRegistry::with_builtins(),
            tools: ToolRegistry::with_builtins(),
            models: ModelRegistry::new(),
            store: None,
            remote: Arc::new(RemotePool::new()),
        }
    }

    /// These components with memory kept in `store`.
    pub fn with_store(mut self, store: Arc<dyn Store>) -> Components {
        self.store = Some(store);
        self
    }
}

/// The agents, the processors they can name, the tools, the models and the store.
#[derive(Debug)]
pub struct Runtime {
    agents: BTreeMap<String, Arc<Agent>>,
    /// Processor definitions of the config, by name.
    definitions: BTreeMap<String, Arc<dyn Processor>>,
    processor_kinds: ProcessorRegistry,
    tools: ToolRegistry,
    models: ModelRegistry,
    store: Option<Arc<dyn Store>>,
    /// The largest file part a run with memory may store.
    max_file_bytes: usize,
    /// Embedders agents may name for recall.
    embedders: Embedders,
    /// The connected instances of remote processors.
    remote: Arc<RemotePool>,
    /// How long a run may go on (`[limits] max_run_ms`).
    max_run: Option<std::time::Duration>,
    /// The largest input message (`[limits] max_message_bytes`).
    max_message_bytes: usize,
    /// The most steps a run may take (`[limits] max_steps`).
    max_steps: u32,
    /// Runs in flight, and shutdown.
    lifecycle: lifecycle::Lifecycle,
}

impl Runtime {
    /// Builds the runtime from a config, checking every name the agents use.
    pub fn new(config: &Config, components: Components) -> Result<Runtime, ConfigError> {
        let Components { processor_kinds, tools, models, store, remote } = components;
        let mut runtime = Runtime {
            agents: BTreeMap::new(),
            definitions: BTreeMap::new(),
            processor_kinds,
            tools,
            models,
            store,
            max_file_bytes: config.storage.max_file_bytes,
            embedders: Embedders::default(),
            remote,
            max_run: (config.limits.max_run_ms > 0)
                .then(|| std::time::Duration::from_millis(config.limits.max_run_ms)),
            max_message_bytes: config.limits.max_message_bytes,
            max_steps: config.limits.max_steps,
            lifecycle: lifecycle::Lifecycle::default(),
        };
        for (name, embedder) in &config.embedders {
            let offset = embedder.span().start;
            if runtime.embedders.get(name).is_some() {
                return Err(config.invalid_at(offset, format!("embedders.{name}: `{name}` is built in")));
            }
            let built = embedder::build(name, embedder.get_ref())
                .map_err(|reason| config.invalid_at(offset, format!("embedders.{name}.{reason}")))?;
            runtime.embedders.insert(name, built);
        }
        for (name, provider) in &config.providers {
            if name == "mock" {
                return Err(
                    config.invalid_at(provider.span().start, "providers.mock: `mock` is built in".to_owned())
                );
            }
            let built = Provider::new(name, provider.get_ref()).map_err(|reason| {
                config.invalid_at(provider.span().start, format!("providers.{name}: {reason}"))
            })?;
            runtime.models.add_provider(built);
        }
        runtime.processor_kinds.set_resources(ProcessorResources {
            models: runtime.models.clone(),
            store: runtime.store.clone(),
        });
        for (name, tool) in &config.tools {
            let offset = tool.span().start;
            if runtime.tools.get(name).is_some() {
                return Err(config.invalid_at(offset, format!("tools.{name}: `{name}` is built in")));
            }
            let remote = RemoteTool::new(name, tool.get_ref(), &runtime.remote)
                .map_err(|reason| config.invalid_at(offset, format!("tools.{name}: {reason}")))?;
            runtime.tools.register_named(name, Arc::new(remote));
        }
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
            if MemoryKind::from_name(&kind).is_some() {
                let message = format!(
                    "processors.{name}: memory processors take their options from the agent's `memory` \
                     table; list `{kind}` in the agent's processors directly"
                );
                return Err(config.invalid_at(offset, message));
            }
            let processor = if kind == remote::KIND {
                RemoteProcessor::from_options(name, options, &runtime.remote)
                    .map(|processor| Arc::new(processor) as Arc<dyn Processor>)
            } else {
                runtime.processor_kinds.build(&kind, name, options)
            }
            .map_err(|reason| config.invalid_at(offset, format!("processors.{name}: {reason}")))?;
            runtime.definitions.insert(name.clone(), processor);
        }
        for (index, entry) in config.processor_tokens.iter().enumerate() {
            let offset = entry.span().start;
            let token = match (&entry.get_ref().token, &entry.get_ref().token_env) {
                (Some(token), None) => token.clone(),
                (None, Some(variable)) => std::env::var(variable).map_err(|_| {
                    config.invalid_at(
                        offset,
                        format!("processor_tokens[{index}].token_env: `{variable}` is not set"),
                    )
                })?,
                _ => {
                    let message =
                        format!("processor_tokens[{index}]: give `token` or `token_env`, exactly one");
                    return Err(config.invalid_at(offset, message));
                }
            };
            if token.is_empty() {
                return Err(
                    config.invalid_at(offset, format!("processor_tokens[{index}]: the token is empty"))
                );
            }
            runtime.remote.allow_token(token, entry.get_ref().processors.iter().cloned());
        }
        runtime.remote.set_timing(PoolTiming {
            ping_interval: Duration::from_millis(config.remote.ping_interval_ms),
            drain_timeout: Duration::from_millis(config.remote.drain_timeout_ms),
        });
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

    /// The connected instances of remote processors.
    pub fn remote_pool(&self) -> &Arc<RemotePool> {
        &self.remote
    }

    /// The store, if memory is kept.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    /// Checks a request and readies its run: the agent, the input, the processor overrides and
    /// (for agents with memory) the thread's owner. Nothing runs yet.
    pub async fn prepare(self: &Arc<Self>, request: RunRequest) -> Result<PreparedRun, RunError> {
        let admitted = self.lifecycle.admit()?;
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
            && !(1..=self.max_steps).contains(&max_steps)
        {
            return Err(RunError::invalid(
                "max_steps",
                format!(
                    "must be between 1 and the server's limits.max_steps = {}, got {max_steps}",
                    self.max_steps
                ),
            ));
        }
        self.check_message_sizes(&request)?;
        let output_schema = match &request.output_schema {
            Some(schema) => Some(
                JsonSchema::new(schema.clone())
                    .map_err(|reason| RunError::invalid("output_schema", reason))?,
            ),
            None => agent.output_schema.clone(),
        };
        let input =
            self.override_or(&request.input_processors, &agent.input_processors, "input_processors")?;
        let output =
            self.override_or(&request.output_processors, &agent.output_processors, "output_processors")?;
        let error =
            self.override_or(&request.error_processors, &agent.error_processors, "error_processors")?;
        let memory = self.memory_for(agent, &request).await?;
        if memory.is_some() {
            self.check_file_sizes(&request)?;
        }
        let run_tools = memory.as_ref().map(MemoryProcessors::tools).unwrap_or_default();
        let chains = [
            assembly::chain(&input, memory.as_ref(), assembly::Placement::Input),
            assembly::chain(&output, memory.as_ref(), assembly::Placement::Output),
            assembly::chain(&error, None, assembly::Placement::Error),
        ];
        let run =
            PreparedRun::new(Arc::clone(self), Arc::clone(agent), request, chains, run_tools, output_schema);
        Ok(run.admitted(admitted))
    }

    /// Shuts down gracefully: new runs are refused (UNAVAILABLE), runs in flight get `grace` to
    /// finish, then end with an error chunk (saving nothing). Returns once every run concluded.
    pub async fn shut_down(&self, grace: std::time::Duration) -> ShutdownReport {
        self.lifecycle.shut_down(grace).await
    }
}
