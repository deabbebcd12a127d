//! Everything about the config that can be checked from the file alone, checked once when it is
//! parsed: each error names the key and the line. What depends on the components the runtime is
//! built with — processor kinds, tools, models, embedders, the store — is checked when the
//! runtime resolves the names (`runtime/build.rs`, `runtime/resolve.rs`).

use toml::Spanned;

use super::{AgentConfig, Config, ConfigError, MemoryConfig, StorageBackend};
use crate::domain::JsonSchema;

impl Config {
    /// Checks the parsed file.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.remote.ping_interval_ms == 0 {
            return Err(self.invalid_at(0, "remote.ping_interval_ms must be positive".to_owned()));
        }
        if self.remote.hello_timeout_ms == 0 {
            return Err(self.invalid_at(0, "remote.hello_timeout_ms must be positive".to_owned()));
        }
        let postgres = &self.storage.postgres;
        if !(1..=1000).contains(&postgres.recall_ef_search) {
            return Err(self.invalid_at(
                0,
                format!(
                    "storage.postgres.recall_ef_search must be between 1 and 1000, got {}",
                    postgres.recall_ef_search
                ),
            ));
        }
        if self.storage.backend == StorageBackend::Sled && self.storage.min_free_mb == 0 {
            return Err(self.invalid_at(
                0,
                "storage.min_free_mb must be at least 1 with the sled store: sled cannot be trusted to \
                 run out of space mid-write (a write it half makes can leave a run that never ends and \
                 a store that does not reopen), so writes must be refused while space is left \
                 (the default is 128)"
                    .to_owned(),
            ));
        }
        if self.limits.slow_client_ms == 0 {
            return Err(self.invalid_at(0, "limits.slow_client_ms must be positive".to_owned()));
        }
        for (index, agent) in self.agents.iter().enumerate() {
            check_agent(agent.get_ref()).map_err(|(key_offset, reason)| {
                self.invalid_at(key_offset.unwrap_or(agent.span().start), format!("agents[{index}].{reason}"))
            })?;
        }
        Ok(())
    }
}

/// One agent's table. The error holds the offending key's offset (when it has one) and a
/// message that starts with the key.
fn check_agent(agent: &AgentConfig) -> Result<(), (Option<usize>, String)> {
    if agent.id.is_empty() {
        return Err((None, "id: must not be empty".to_owned()));
    }
    if let Some(script) = &agent.script
        && script.get_ref().replies.is_empty()
    {
        return Err(at(script, "script: must hold at least one reply".to_owned()));
    }
    if let Some(memory) = &agent.memory {
        check_memory(memory.get_ref()).map_err(|reason| at(memory, format!("memory.{reason}")))?;
    }
    Ok(())
}

/// The `memory` table: what serde cannot check. The error starts with the offending key.
fn check_memory(memory: &MemoryConfig) -> Result<(), String> {
    if let Some(recall) = &memory.semantic_recall {
        if !(1..=100).contains(&recall.top_k) {
            return Err(format!("semantic_recall.top_k: must be between 1 and 100, got {}", recall.top_k));
        }
        if recall.threshold.is_some_and(|threshold| !(-1.0..=1.0).contains(&threshold)) {
            return Err("semantic_recall.threshold: must be between -1 and 1".to_owned());
        }
    }
    if let Some(working) = &memory.working_memory {
        if working.template.is_some() && working.schema.is_some() {
            return Err("working_memory: give `template` or `schema`, not both".to_owned());
        }
        if let Some(schema) = &working.schema {
            JsonSchema::compile(schema.clone())
                .map_err(|reason| format!("working_memory.schema: {reason}"))?;
        }
    }
    Ok(())
}

/// The offset of a key's value, or none for a defaulted value (reported at its table).
fn at<T>(value: &Spanned<T>, message: String) -> (Option<usize>, String) {
    let span = value.span();
    ((!span.is_empty()).then_some(span.start), message)
}
