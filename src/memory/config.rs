//! The agent's `memory` table.

use serde::Deserialize;
use serde_json::Value;

/// How an agent remembers. Memory works for runs that name a `thread_id` (and a `resource_id`,
/// which defaults to the thread id).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// How many of the thread's last messages are loaded before the model call; 0 loads none
    /// (runs are still saved). Default 10.
    #[serde(default = "default_last_messages")]
    pub last_messages: u32,
    /// A document about the user that the model keeps up to date.
    #[serde(default)]
    pub working_memory: Option<WorkingMemoryConfig>,
}

fn default_last_messages() -> u32 {
    10
}

/// `working_memory = { scope = "resource", template = "..." }` or `{ schema = {...} }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkingMemoryConfig {
    /// Off switch, to keep the table while disabling it. Default true.
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Shared by all threads of the resource (default), or one per thread.
    #[serde(default)]
    pub scope: WorkingMemoryScopeKind,
    /// The markdown template (replaced whole on update). Default: a user profile.
    #[serde(default)]
    pub template: Option<String>,
    /// A JSON schema: working memory is then a JSON object, deep-merged on update.
    #[serde(default)]
    pub schema: Option<Value>,
}

fn enabled() -> bool {
    true
}

/// Where working memory lives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkingMemoryScopeKind {
    /// One per resource, shared by its threads.
    #[default]
    Resource,
    /// One per thread.
    Thread,
}

impl MemoryConfig {
    /// Checks what serde cannot: the error starts with the offending key.
    pub fn check(&self) -> Result<(), String> {
        if let Some(working) = &self.working_memory {
            if working.template.is_some() && working.schema.is_some() {
                return Err("working_memory: give `template` or `schema`, not both".to_owned());
            }
            if let Some(schema) = &working.schema {
                jsonschema::validator_for(schema)
                    .map_err(|error| format!("working_memory.schema: not a valid JSON schema: {error}"))?;
            }
        }
        Ok(())
    }

    /// The working memory options, when it is on.
    pub fn active_working_memory(&self) -> Option<&WorkingMemoryConfig> {
        self.working_memory.as_ref().filter(|working| working.enabled)
    }
}
