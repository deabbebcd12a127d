//! From config names to an agent: tools, models and processor lists resolved and checked once,
//! at start-up (and for a request's processor overrides, at each request).

use std::sync::Arc;

use toml::Spanned;

use super::{Agent, NamedProcessor, ProcessorRef, RunError, Runtime};
use crate::config::{AgentConfig, ProcessorEntry};
use crate::domain::JsonSchema;
use crate::memory::MemoryKind;
use crate::memory::embedder::LEXICAL;
use crate::remote::RemoteProcessor;

impl Runtime {
    /// The processor a name stands for: a definition of the config, a memory kind, or a
    /// built-in kind with its default options (the kind's name is then its id).
    fn processor_by_name(&self, name: &str) -> Result<ProcessorRef, String> {
        if let Some(processor) = self.definitions.get(name) {
            return Ok(ProcessorRef::Fixed(Arc::clone(processor)));
        }
        if let Some(kind) = MemoryKind::from_name(name) {
            return Ok(ProcessorRef::Memory(kind));
        }
        if !self.processor_kinds.has_kind(name) {
            return Err(format!(
                "unknown processor `{name}` (not a `[processors.*]` definition nor a built-in kind)"
            ));
        }
        self.processor_kinds.build(name, name, toml::Table::new()).map(ProcessorRef::Fixed).map_err(
            |reason| format!("processor kind `{name}` needs a `[processors.*]` definition: {reason}"),
        )
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

    /// The processors of an agent's list: names, and remote processors declared inline.
    fn configured_processors(
        &self,
        entries: &[ProcessorEntry],
        field: &str,
    ) -> Result<Vec<NamedProcessor>, (String, String)> {
        let mut processors = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let named = match entry {
                ProcessorEntry::Name(name) => self.named_processors(std::slice::from_ref(name), field),
                ProcessorEntry::Inline(options) => {
                    self.inline_remote(options.clone()).map(|named| vec![named])
                }
            };
            processors.extend(named.map_err(|(_, reason)| (format!("{field}[{index}]"), reason))?);
        }
        Ok(processors)
    }

    /// `{ remote = "<id>", ... }`: a remote processor with that id and those options.
    fn inline_remote(&self, mut options: toml::Table) -> Result<NamedProcessor, (String, String)> {
        let invalid = |reason: String| (String::new(), reason);
        let remote_id = match options.remove("remote") {
            Some(toml::Value::String(id)) if !id.is_empty() => id,
            Some(_) => return Err(invalid("`remote` must be a non-empty processor id".to_owned())),
            None => {
                return Err(invalid(
                    "an inline processor needs `remote = \"<processor id>\"` (other kinds are declared \
                     under [processors.*])"
                        .to_owned(),
                ));
            }
        };
        if options.contains_key("remote_id") {
            return Err(invalid("give the processor id once, as `remote`".to_owned()));
        }
        let processor =
            RemoteProcessor::from_options(&remote_id, options, self.remote_pool()).map_err(invalid)?;
        Ok(NamedProcessor { name: remote_id, processor: ProcessorRef::Fixed(Arc::new(processor)) })
    }

    /// A request's processor list when it overrides one, else the agent's.
    pub(super) fn override_or(
        &self,
        names: &Option<Vec<String>>,
        configured: &[NamedProcessor],
        field: &str,
    ) -> Result<Vec<NamedProcessor>, RunError> {
        match names {
            Some(names) => self
                .named_processors(names, &format!("{field}.names"))
                .map_err(|(field, reason)| RunError::invalid(field, reason)),
            None => Ok(configured.to_vec()),
        }
    }

    /// Resolves an agent's names. The error holds the offending key's offset (when it has one)
    /// and a message that starts with the key.
    pub(super) fn resolve_agent(&self, config: &AgentConfig) -> Result<Agent, (Option<usize>, String)> {
        // Defaulted values have an empty span: they are reported at the agent's table.
        let at = |span: std::ops::Range<usize>, message: String| {
            ((!span.is_empty()).then_some(span.start), message)
        };
        let mut max_steps = *config.max_steps.get_ref();
        if config.max_steps.span().is_empty() {
            // The default yields to a lower server-wide limit.
            max_steps = max_steps.min(self.max_steps);
        }
        if !(1..=self.max_steps).contains(&max_steps) {
            let message = format!(
                "max_steps: must be between 1 and limits.max_steps = {}, got {max_steps}",
                self.max_steps
            );
            return Err(at(config.max_steps.span(), message));
        }
        let script = config.script.as_ref().map(|script| Arc::new(script.get_ref().clone()));
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
            tools.push(Arc::clone(tool));
        }
        if let Some(memory) = &config.memory {
            if self.store.is_none() {
                return Err(at(
                    memory.span(),
                    "memory: needs a store (serve with a data directory)".to_owned(),
                ));
            }
        }
        let embedder_name = config
            .memory
            .as_ref()
            .and_then(|memory| memory.get_ref().semantic_recall.as_ref())
            .map(|recall| &recall.embedder);
        let embedder = match embedder_name {
            None => Arc::clone(self.embedders.get(LEXICAL).expect("lexical is built in")),
            Some(name) => match self.embedders.get(name) {
                Some(embedder) => Arc::clone(embedder),
                None => {
                    let known: Vec<&str> = self.embedders.names().collect();
                    let span = config.memory.as_ref().map(Spanned::span).unwrap_or_default();
                    let message = format!(
                        "memory.semantic_recall.embedder: unknown embedder `{name}` (known: {})",
                        known.join(", ")
                    );
                    return Err(at(span, message));
                }
            },
        };
        let processors = |entries: &Spanned<Vec<ProcessorEntry>>, field: &str| {
            self.configured_processors(entries.get_ref(), field)
                .map_err(|(field, reason)| at(entries.span(), format!("{field}: {reason}")))
        };
        let output_schema = match &config.output_schema {
            Some(schema) => Some(
                JsonSchema::new(schema.get_ref().clone())
                    .map_err(|reason| at(schema.span(), format!("output_schema: {reason}")))?,
            ),
            None => None,
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
            memory: config.memory.as_ref().map(|memory| Arc::new(memory.get_ref().clone())),
            embedder,
            output_schema,
        })
    }
}
