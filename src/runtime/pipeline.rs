//! An agent's pipeline as an operator reads it: each stage's processors in the order a run with
//! memory calls them, the memory processors the runtime adds marked as such — the same order
//! [`super::assembly::chain`] builds.

use super::assembly::listed_memory_kinds;
use super::{Agent, ProcessorRef};
use crate::domain::Hook;
use crate::memory::{MemoryKind, MemoryProcessors};

/// A stage of the pipeline: the list a processor is named in, which decides the hooks it is called
/// for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `processInput`, `processInputStep`, `processLLMRequest`, `processLLMResponse`.
    Input,
    /// `processOutputStream`, `processOutputStep`, `processToolResult`, `processOutputResult`.
    Output,
    /// `processAPIError`: when the model rejects a call.
    Error,
}

impl Stage {
    /// The stage whose list a hook is called from.
    pub fn of(hook: Hook) -> Stage {
        match hook {
            Hook::ProcessInput
            | Hook::ProcessInputStep
            | Hook::ProcessLlmRequest
            | Hook::ProcessLlmResponse => Stage::Input,
            Hook::ProcessOutputStream
            | Hook::ProcessOutputStep
            | Hook::ProcessToolResult
            | Hook::ProcessOutputResult => Stage::Output,
            Hook::ProcessApiError => Stage::Error,
        }
    }

    /// `input`, `output` or `error`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Input => "input",
            Stage::Output => "output",
            Stage::Error => "error",
        }
    }
}

/// One processor of the pipeline.
#[derive(Debug, Clone)]
pub struct PipelineEntry {
    /// Its stage.
    pub stage: Stage,
    /// Its id in runs (records, tripwires).
    pub id: String,
    /// A built-in kind, `remote`, or a memory kind.
    pub kind: String,
    /// Its definition's options.
    pub options: toml::Table,
    /// Added by the runtime for the agent's memory (runs that name a thread), not listed.
    pub automatic: bool,
    /// The hooks it implements that its stage calls (empty for memory processors, built per run).
    pub hooks: Vec<Hook>,
}

impl Agent {
    /// The pipeline, stage by stage, in call order.
    pub fn pipeline(&self) -> Vec<PipelineEntry> {
        let memory_on: Vec<MemoryKind> = match &self.memory {
            None => Vec::new(),
            Some(config) => MemoryKind::ALL
                .into_iter()
                .filter(|kind| match kind {
                    MemoryKind::MessageHistory => true,
                    MemoryKind::WorkingMemory => config.active_working_memory().is_some(),
                    MemoryKind::SemanticRecall => config.semantic_recall.is_some(),
                })
                .collect(),
        };
        let mut pipeline = Vec::new();
        for (stage, listed, added) in [
            (Stage::Input, &self.input_processors, MemoryProcessors::INPUT),
            (Stage::Output, &self.output_processors, MemoryProcessors::OUTPUT),
            (Stage::Error, &self.error_processors, &[][..]),
        ] {
            let listed_memory = listed_memory_kinds(listed);
            let automatic = added
                .iter()
                .filter(|kind| memory_on.contains(kind) && !listed_memory.contains(kind))
                .map(|kind| PipelineEntry {
                    stage,
                    id: kind.name().to_owned(),
                    kind: kind.name().to_owned(),
                    options: toml::Table::new(),
                    automatic: true,
                    hooks: Vec::new(),
                });
            let listed = listed.iter().map(|named| PipelineEntry {
                stage,
                id: match &named.processor {
                    ProcessorRef::Fixed(processor) => processor.id().to_owned(),
                    ProcessorRef::Memory(kind) => kind.name().to_owned(),
                },
                kind: named.profile.kind.clone(),
                options: named.profile.options.clone(),
                automatic: false,
                hooks: match &named.processor {
                    ProcessorRef::Fixed(processor) => {
                        processor.hooks().iter().filter(|hook| Stage::of(*hook) == stage).collect()
                    }
                    ProcessorRef::Memory(_) => Vec::new(),
                },
            });
            if stage == Stage::Output {
                pipeline.extend(listed);
                pipeline.extend(automatic);
            } else {
                pipeline.extend(automatic);
                pipeline.extend(listed);
            }
        }
        pipeline
    }
}
