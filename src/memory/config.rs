//! The agent's `memory` table.

use serde::Deserialize;

/// How an agent remembers. Memory works for runs that name a `thread_id` (and a `resource_id`,
/// which defaults to the thread id).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// How many of the thread's last messages are loaded before the model call; 0 loads none
    /// (runs are still saved). Default 10.
    #[serde(default = "default_last_messages")]
    pub last_messages: u32,
}

fn default_last_messages() -> u32 {
    10
}
