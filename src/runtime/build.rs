//! Building the runtime: the config's embedders, providers, tools, processor definitions and
//! processor tokens wired to the [`Components`] it is given, then each agent's names — tools,
//! models, processor lists — resolved and checked once, at start-up (and a request's processor
//! overrides, at each request). The config checked what it could alone (`config/validate.rs`);
//! what is checked here depends on the components.

use std::sync::Arc;

use toml::Spanned;

use std::collections::BTreeMap;
use std::time::Duration;

use super::{
    Agent, NamedProcessor, ProcessorProfile, ProcessorRef, RunError, Runtime, StreamBudget, lifecycle,
    records,
};
use crate::config::{AgentConfig, ProcessorEntry};
use crate::config::{Config, ConfigError};
use crate::domain::JsonSchema;
use crate::memory::MemoryKind;
use crate::memory::embedder::LEXICAL;
use crate::memory::embedder::{self, Embedders};
use crate::model::ModelRegistry;
use crate::model::provider::Provider;
use crate::processor::{Processor, ProcessorRegistry, ProcessorResources};
use crate::remote::RemoteProcessor;
use crate::remote::{self, PoolTiming, RemotePool, RemoteTool};
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

impl Runtime {
    /// Builds the runtime from a config, checking every name the agents use.
    pub fn new(config: &Config, components: Components) -> Result<Runtime, ConfigError> {
        let Components { processor_kinds, tools, models, store, remote } = components;
        let records = records::RecordWriter::new(store.clone(), &config.records);
        let mut runtime = Runtime {
            agents: BTreeMap::new(),
            definitions: BTreeMap::new(),
            processor_kinds,
            tools,
            models,
            store,
            max_file_bytes: config.storage.max_file_bytes,
            field_limits: config.storage.field_limits(),
            embedders: Embedders::default(),
            remote,
            max_run: (config.limits.max_run_ms > 0)
                .then(|| std::time::Duration::from_millis(config.limits.max_run_ms)),
            max_message_bytes: config.limits.max_message_bytes,
            max_steps: config.limits.max_steps,
            lifecycle: lifecycle::Lifecycle::default(),
            records,
            feed: Default::default(),
            stream_budget: StreamBudget::new(
                config.limits.max_buffered_mb.saturating_mul(1024 * 1024),
                config.limits.max_stream_buffer_kb.saturating_mul(1024),
            ),
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
            let profile = ProcessorProfile { kind: kind.clone(), options: options.clone() };
            let processor = if kind == remote::KIND {
                RemoteProcessor::from_options(name, options, &runtime.remote)
                    .map(|processor| Arc::new(processor) as Arc<dyn Processor>)
            } else {
                runtime.processor_kinds.build(&kind, name, options)
            }
            .map_err(|reason| config.invalid_at(offset, format!("processors.{name}: {reason}")))?;
            runtime.definitions.insert(name.clone(), (processor, profile));
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
            hello_timeout: Duration::from_millis(config.remote.hello_timeout_ms),
            max_pending_hellos: config.remote.max_pending_hellos,
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

    /// The processor a name stands for: a definition of the config, a memory kind, or a
    /// built-in kind with its default options (the kind's name is then its id).
    fn processor_by_name(&self, name: &str) -> Result<(ProcessorRef, ProcessorProfile), String> {
        if let Some((processor, profile)) = self.definitions.get(name) {
            return Ok((ProcessorRef::Fixed(Arc::clone(processor)), profile.clone()));
        }
        let profile = ProcessorProfile { kind: name.to_owned(), options: toml::Table::new() };
        if let Some(kind) = MemoryKind::from_name(name) {
            return Ok((ProcessorRef::Memory(kind), profile));
        }
        if !self.processor_kinds.has_kind(name) {
            return Err(format!(
                "unknown processor `{name}` (not a `[processors.*]` definition nor a built-in kind)"
            ));
        }
        let processor = self.processor_kinds.build(name, name, toml::Table::new()).map_err(|reason| {
            format!("processor kind `{name}` needs a `[processors.*]` definition: {reason}")
        })?;
        Ok((ProcessorRef::Fixed(processor), profile))
    }

    /// The processors for a list of names. The error is the offending field and the reason.
    fn named_processors(
        &self,
        names: &[String],
        field: &str,
    ) -> Result<Vec<NamedProcessor>, (String, String)> {
        let mut processors = Vec::with_capacity(names.len());
        for (index, name) in names.iter().enumerate() {
            let (processor, profile) =
                self.processor_by_name(name).map_err(|reason| (format!("{field}[{index}]"), reason))?;
            processors.push(NamedProcessor { name: name.clone(), processor, profile });
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
        let profile = ProcessorProfile { kind: remote::KIND.to_owned(), options: options.clone() };
        let processor = RemoteProcessor::from_options(&remote_id, options, self.remote_pool())
            .map_err(|error| invalid(error.to_string()))?;
        Ok(NamedProcessor { name: remote_id, processor: ProcessorRef::Fixed(Arc::new(processor)), profile })
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
        if let Some(memory) = &config.memory
            && self.store.is_none()
        {
            return Err(at(memory.span(), "memory: needs a store (serve with a data directory)".to_owned()));
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
            record_content: config.record.content,
        })
    }
}
