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
mod build;
mod lifecycle;
mod pipeline;
mod records;
mod request;
mod result;
mod run;
mod run_feed;
mod sink;
mod stream_budget;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use self::agent::{Agent, NamedProcessor, ProcessorProfile, ProcessorRef};
pub use self::build::Components;
pub use self::lifecycle::ShutdownReport;
pub use self::pipeline::{PipelineEntry, Stage};
pub use self::request::{RunError, RunRequest};
pub use self::result::RunResult;
pub use self::run::{PreparedRun, RETRY_FEEDBACK_TAG};
pub use self::run_feed::FEED_CAPACITY;
pub use self::sink::{ChunkSink, ClientGone};
pub use self::stream_budget::{ChunkReceiver, CutOff, StreamBudget};
use crate::domain::JsonSchema;
use crate::memory::MemoryProcessors;
use crate::memory::embedder::Embedders;
use crate::model::ModelRegistry;
use crate::processor::{Processor, ProcessorRegistry};
use crate::remote::RemotePool;
use crate::storage::Store;
use crate::tool::ToolRegistry;

/// The agents, the processors they can name, the tools, the models and the store.
#[derive(Debug)]
pub struct Runtime {
    agents: BTreeMap<String, Arc<Agent>>,
    /// Processor definitions of the config, by name.
    definitions: BTreeMap<String, (Arc<dyn Processor>, ProcessorProfile)>,
    processor_kinds: ProcessorRegistry,
    tools: ToolRegistry,
    models: ModelRegistry,
    store: Option<Arc<dyn Store>>,
    /// The largest file part a run with memory may store.
    max_file_bytes: usize,
    /// How large a stored title, metadata or working memory may be.
    field_limits: crate::domain::FieldLimits,
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
    /// Where runs' records go.
    records: records::RecordWriter,
    /// Runs beginning and ending, for those watching.
    feed: run_feed::RunFeed,
    /// What streams' unread chunks may take (`[limits] max_buffered_mb`, `max_stream_buffer_kb`).
    stream_budget: Arc<StreamBudget>,
}

impl Runtime {
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

    /// The embedders agents may name (`lexical` and the config's), for searches outside a run.
    pub fn embedders(&self) -> &Embedders {
        &self.embedders
    }

    /// Runs beginning and ending from now on (a watcher more than
    /// [`run_feed::FEED_CAPACITY`] events behind misses the oldest).
    pub fn watch_runs(&self) -> tokio::sync::broadcast::Receiver<crate::domain::RunEvent> {
        self.feed.watch()
    }

    /// What streams' unread chunks may take, and take now: a streaming run's chunks go through
    /// [`StreamBudget::open`].
    pub fn stream_budget(&self) -> &Arc<StreamBudget> {
        &self.stream_budget
    }

    /// Waits until the records of the runs that ended so far are written.
    pub async fn flush_records(&self) {
        self.records.flush().await;
    }

    /// The store, if memory is kept.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    /// The largest conversation message a run takes, or a processor may put in its place
    /// (`[limits] max_message_bytes`).
    pub(crate) fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// How large a stored title, metadata or working memory may be (`[storage]`).
    pub fn field_limits(&self) -> crate::domain::FieldLimits {
        self.field_limits
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
                    .map_err(|reason| RunError::invalid("output_schema", reason.to_string()))?,
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
