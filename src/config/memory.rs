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
    /// Recall of similar past messages.
    #[serde(default)]
    pub semantic_recall: Option<SemanticRecallConfig>,
}

/// `semantic_recall = { top_k = 4, message_range = 1, scope = "thread", threshold = 0.3 }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SemanticRecallConfig {
    /// How many similar messages to find. Default 4.
    #[serde(default = "default_top_k")]
    pub top_k: usize,
    /// Neighbours added around each hit: a number for both sides, or `{ before, after }`.
    /// Default 1.
    #[serde(default)]
    pub message_range: MessageRange,
    /// Search this thread only (the default: it fails safe when a resource is shared), or every
    /// thread of the resource.
    #[serde(default)]
    pub scope: RecallScopeKind,
    /// Hits scoring below this cosine similarity are dropped.
    #[serde(default)]
    pub threshold: Option<f32>,
    /// The embedder: `lexical` (built in, the default).
    #[serde(default = "default_embedder")]
    pub embedder: String,
}

fn default_top_k() -> usize {
    4
}

fn default_embedder() -> String {
    "lexical".to_owned()
}

/// Neighbours of a recall hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum MessageRange {
    /// As many before as after.
    Both(usize),
    /// Before and after, each its own.
    Split {
        /// Messages before the hit.
        before: usize,
        /// Messages after the hit.
        after: usize,
    },
}

impl Default for MessageRange {
    fn default() -> MessageRange {
        MessageRange::Both(1)
    }
}

impl MessageRange {
    /// (before, after).
    pub fn before_after(self) -> (usize, usize) {
        match self {
            MessageRange::Both(range) => (range, range),
            MessageRange::Split { before, after } => (before, after),
        }
    }
}

/// Where recall searches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecallScopeKind {
    /// This thread only.
    #[default]
    Thread,
    /// Every thread of the resource.
    Resource,
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
    /// The working memory options, when it is on.
    pub fn active_working_memory(&self) -> Option<&WorkingMemoryConfig> {
        self.working_memory.as_ref().filter(|working| working.enabled)
    }
}
