//! The records the store keeps and the queries it answers.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::domain::{IdPatterns, Message, ResourceQuota, RunOutcome, RunRecord, RunStart, RunTally};

/// A conversation, owned by a resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    /// Unique id.
    pub id: String,
    /// The owner: a user or a tenant.
    pub resource_id: String,
    /// A title, empty until set.
    pub title: String,
    /// Free metadata.
    pub metadata: Map<String, Value>,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    /// Milliseconds since the Unix epoch of the last change (a run saved, a title set).
    pub updated_at: i64,
    /// The sequence number of the thread's next message.
    pub next_seq: u64,
}

/// A thread to create.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewThread {
    /// Unique id; generated when empty.
    pub id: String,
    /// The owner.
    pub resource_id: String,
    /// A title.
    pub title: String,
    /// Free metadata.
    pub metadata: Map<String, Value>,
    /// The resource's limits, as the caller's API key sets them.
    pub quota: ResourceQuota,
}

impl NewThread {
    /// The thread it makes, created `now`, with a fresh id when it names none.
    pub fn made_at(&self, now: i64) -> Thread {
        Thread {
            id: if self.id.is_empty() { crate::domain::new_id() } else { self.id.clone() },
            resource_id: self.resource_id.clone(),
            title: self.title.clone(),
            metadata: self.metadata.clone(),
            created_at: now,
            updated_at: now,
            next_seq: 0,
        }
    }
}

/// Changes to a thread; `None` keeps a field.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadUpdate {
    /// A new title.
    pub title: Option<String>,
    /// New metadata, replacing the old.
    pub metadata: Option<Map<String, Value>>,
}

/// One page of threads.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadPage {
    /// The threads, newest first.
    pub threads: Vec<Thread>,
    /// Pass back to get the next page; empty on the last page.
    pub next_cursor: String,
}

/// A message with its position in its thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// Position in the thread, from 0.
    pub seq: u64,
    /// The message.
    pub message: Message,
}

/// Which way a page of messages goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Oldest first.
    Forward,
    /// Newest first.
    Backward,
}

/// One page of messages.
#[derive(Debug, Clone, PartialEq)]
pub struct MessagePage {
    /// The messages, in the page's direction.
    pub messages: Vec<StoredMessage>,
    /// Pass back to get the next page; empty on the last page.
    pub next_cursor: String,
}

/// The embedding of one stored message.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingRecord {
    /// The message it embeds.
    pub message_id: String,
    /// The embedder that made it (e.g. `lexical-v1`).
    pub embedder: String,
    /// The vector, L2-normalised.
    pub vector: Vec<f32>,
}

/// The scope of a recall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecallScope {
    /// Only this thread of this resource.
    Thread {
        /// The thread's resource.
        resource_id: String,
        /// The thread.
        thread_id: String,
    },
    /// Every thread of this resource.
    Resource(String),
}

/// A similarity search.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorQuery {
    /// Where to search. A resource scope never returns another resource's messages.
    pub scope: RecallScope,
    /// The query's embedder; stored vectors of another embedder are an error.
    pub embedder: String,
    /// The query vector, L2-normalised.
    pub vector: Vec<f32>,
    /// How many hits at most.
    pub top_k: usize,
    /// Hits scoring below this are dropped.
    pub threshold: Option<f32>,
}

/// A search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The message's thread.
    pub thread_id: String,
    /// The message's position in its thread.
    pub seq: u64,
    /// Cosine similarity.
    pub score: f32,
}

/// Whose working memory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WorkingMemoryScope {
    /// Shared by all threads of a resource.
    Resource(String),
    /// One thread's own.
    Thread {
        /// The thread's resource.
        resource_id: String,
        /// The thread.
        thread_id: String,
    },
}

impl WorkingMemoryScope {
    /// The scope as a key (`resource:<id>`, `thread:<resource length>:<resource>:<thread>`).
    pub fn key(&self) -> String {
        match self {
            WorkingMemoryScope::Resource(id) => format!("resource:{id}"),
            WorkingMemoryScope::Thread { resource_id, thread_id } => {
                format!("thread:{}:{resource_id}:{thread_id}", resource_id.len())
            }
        }
    }

    /// The resource whose memory it is.
    pub fn resource_id(&self) -> &str {
        match self {
            WorkingMemoryScope::Resource(id) | WorkingMemoryScope::Thread { resource_id: id, .. } => id,
        }
    }

    /// The thread whose memory it is, for thread scope.
    pub fn thread_id(&self) -> Option<&str> {
        match self {
            WorkingMemoryScope::Thread { thread_id, .. } => Some(thread_id),
            WorkingMemoryScope::Resource(_) => None,
        }
    }
}

impl std::fmt::Display for WorkingMemoryScope {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkingMemoryScope::Resource(id) => write!(formatter, "resource `{id}`"),
            WorkingMemoryScope::Thread { thread_id, .. } => write!(formatter, "thread `{thread_id}`"),
        }
    }
}

/// Who shares a cached model response.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CacheScope {
    /// The runs of one resource.
    Resource(String),
    /// The runs of one thread.
    Thread {
        /// The thread's resource.
        resource_id: String,
        /// The thread.
        thread_id: String,
    },
    /// Every run of one agent.
    Agent(String),
    /// Every run.
    Global,
}

impl CacheScope {
    /// The scope as its entries are keyed.
    pub fn key(&self) -> String {
        match self {
            CacheScope::Resource(id) => format!("resource:{id}"),
            // The resource's length keeps `a:b` + `c` apart from `a` + `b:c`.
            CacheScope::Thread { resource_id, thread_id } => {
                format!("thread:{}:{resource_id}:{thread_id}", resource_id.len())
            }
            CacheScope::Agent(id) => format!("agent:{id}"),
            CacheScope::Global => "global".to_owned(),
        }
    }
}

/// Stored working memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkingMemoryRecord {
    /// Markdown, or a JSON document.
    pub content: String,
    /// Increases by one on every write, from 1.
    pub version: u64,
    /// Milliseconds since the Unix epoch.
    pub updated_at: i64,
}

/// What a finished run adds to memory.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSave {
    /// The thread; created if missing.
    pub thread_id: String,
    /// The thread's owner; a thread of another resource is refused.
    pub resource_id: String,
    /// The messages, in order.
    pub messages: Vec<Message>,
    /// Embeddings of some of those messages.
    pub embeddings: Vec<EmbeddingRecord>,
    /// A working memory write: scope, content, and the version it was based on.
    pub working_memory: Option<(WorkingMemoryScope, String, u64)>,
    /// The resource's limits, as the caller's API key sets them.
    pub quota: ResourceQuota,
}

/// What a delete removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeleteReport {
    /// Threads removed.
    pub threads: u64,
    /// Messages removed.
    pub messages: u64,
    /// Embeddings removed.
    pub embeddings: u64,
    /// Working memories removed.
    pub working_memories: u64,
}

impl DeleteReport {
    /// Adds another report to this one.
    pub fn add(&mut self, other: DeleteReport) {
        self.threads += other.threads;
        self.messages += other.messages;
        self.embeddings += other.embeddings;
        self.working_memories += other.working_memories;
    }
}

/// Which run records to list. Empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    /// Only runs of this agent.
    pub agent_id: String,
    /// Only runs of this resource.
    pub resource_id: String,
    /// Only runs of this thread (of `resource_id`).
    pub thread_id: String,
    /// Only runs that ended so.
    pub outcome: Option<RunOutcome>,
    /// Only runs with a hook call of this processor.
    pub processor_id: String,
    /// Only runs started at or after this (milliseconds since the epoch).
    pub since: Option<i64>,
    /// Only runs started before this.
    pub until: Option<i64>,
    /// Only runs of the agents these patterns allow (a key's `agents`); `None`: any agent.
    pub agents: Option<IdPatterns>,
}

impl RunFilter {
    /// Whether `record` passes.
    pub fn matches(&self, record: &RunRecord) -> bool {
        self.matches_ids(&record.agent_id, &record.resource_id, &record.thread_id)
            && self.outcome.is_none_or(|outcome| outcome == record.outcome)
            && (self.processor_id.is_empty() || record.processors().contains(&self.processor_id.as_str()))
            && self.in_window(record.started_at)
    }

    /// Whether the run of `tally` passes.
    pub fn matches_tally(&self, tally: &RunTally) -> bool {
        self.matches_ids(&tally.agent_id, &tally.resource_id, &tally.thread_id)
            && self.outcome.is_none_or(|outcome| outcome == tally.outcome)
            && (self.processor_id.is_empty() || tally.has_processor(&self.processor_id))
            && self.in_window(tally.started_at)
    }

    /// Whether a run that started at `started_at` is in the window (`since`, `until`).
    pub fn in_window(&self, started_at: i64) -> bool {
        self.since.is_none_or(|since| started_at >= since)
            && self.until.is_none_or(|until| started_at < until)
    }

    /// Whether a run that just began passes, as far as can be told before it ends (its outcome
    /// and processors are not known yet).
    pub fn matches_start(&self, start: &RunStart) -> bool {
        self.matches_ids(&start.agent_id, &start.resource_id, &start.thread_id)
    }

    /// Whether a run of this agent, resource and thread passes the filter's ids and agents.
    fn matches_ids(&self, agent_id: &str, resource_id: &str, thread_id: &str) -> bool {
        let field = |wanted: &str, value: &str| wanted.is_empty() || wanted == value;
        field(&self.agent_id, agent_id)
            && field(&self.resource_id, resource_id)
            && field(&self.thread_id, thread_id)
            && self.agents.as_ref().is_none_or(|agents| agents.allows(agent_id))
    }
}

/// A page of run records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunPage {
    /// The records, newest first.
    pub runs: Vec<RunRecord>,
    /// Pass back to get the next page; empty on the last page.
    pub next_cursor: String,
}
