//! An agent as the runtime holds it: its config resolved into models, tools and processors.

use std::sync::Arc;

use crate::config::{MemoryConfig, MockScript};
use crate::domain::ModelSettings;
use crate::memory::MemoryKind;
use crate::memory::embedder::Embedder;
use crate::processor::Processor;

/// What an entry of a processor list stands for.
#[derive(Debug, Clone)]
pub enum ProcessorRef {
    /// A processor built from the config.
    Fixed(Arc<dyn Processor>),
    /// A memory processor, built per run (and left out of runs without memory).
    Memory(MemoryKind),
}

/// An entry of a processor list, with the name the config gave it.
#[derive(Debug, Clone)]
pub struct NamedProcessor {
    /// The definition name or built-in kind it was configured by.
    pub name: String,
    /// The processor.
    pub processor: ProcessorRef,
    /// How it was configured, for those who look at the pipeline.
    pub profile: ProcessorProfile,
}

/// How a processor was configured: its kind and the options its definition gave.
#[derive(Debug, Clone, Default)]
pub struct ProcessorProfile {
    /// A built-in kind, `remote`, or a memory kind.
    pub kind: String,
    /// The definition's options (none for a kind named directly).
    pub options: toml::Table,
}

/// A configured, validated agent.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Unique id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// The system prompt (an untagged system message of every run).
    pub instructions: String,
    /// The default `provider/model`.
    pub model: String,
    /// The tools on offer (each step offers those available then).
    pub tools: Vec<Arc<dyn crate::tool::Tool>>,
    /// Input processors, in order.
    pub input_processors: Vec<NamedProcessor>,
    /// Output processors, in order.
    pub output_processors: Vec<NamedProcessor>,
    /// Error processors, in order.
    pub error_processors: Vec<NamedProcessor>,
    /// Retries processors may ask for; `None` turns retry requests into aborts.
    pub max_processor_retries: Option<u32>,
    /// Model steps per run.
    pub max_steps: u32,
    /// Default sampling settings.
    pub settings: ModelSettings,
    /// Replies of `mock/script`.
    pub script: Option<Arc<MockScript>>,
    /// How the agent remembers; `None` for no memory.
    pub memory: Option<Arc<MemoryConfig>>,
    /// The embedder of semantic recall (the lexical one when the agent has none).
    pub embedder: Arc<dyn Embedder>,
    /// The JSON schema every final answer must follow, if any.
    pub output_schema: Option<super::JsonSchema>,
    /// Whether its run records keep what the model saw and the client got.
    pub record_content: bool,
}
