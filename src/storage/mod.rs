//! Storage: the [`Store`] trait — threads, messages, embeddings, working memory and cached model
//! responses — with two implementations: embedded on sled ([`SledStore`], the default) and on
//! PostgreSQL with pgvector ([`PgStore`], shared by several replicas).
//!
//! Each trait method is a unit of atomicity and durability: when it returns `Ok`, what it wrote
//! is on disk, all of it or nothing. Search is pushed down (scope, top-k and threshold in, scored
//! hits out) so that a PostgreSQL + pgvector backend can implement the same trait.

mod compaction;
mod keys;
mod postgres;
mod quota;
mod reopening;
mod run_segments;
mod run_tallies;
mod sled_codec;
mod sled_store;
mod types;
mod upgrade;
mod vector_clusters;
mod vector_codes;
mod vector_file;
mod vector_index;
mod vector_quantizer;
mod vector_scratch;
mod vectors;
mod writability;

pub use self::compaction::{Compacted, compact, directory_bytes};
pub use self::postgres::{PgOptions, PgStore, SCHEMA_VERSION};
pub use self::quota::{ResourceUsage, check_quota};
pub use self::sled_store::{DEFAULT_CACHE_BYTES, DEFAULT_MIN_FREE_BYTES, SledStore};
pub use self::types::{
    CacheScope, DeleteReport, Direction, EmbeddingRecord, Hit, MessagePage, NewThread, RecallScope,
    RunFilter, RunPage, RunSave, StoredMessage, Thread, ThreadPage, ThreadUpdate, VectorQuery,
    WorkingMemoryRecord, WorkingMemoryScope,
};
pub use self::vector_codes::dot;
pub use self::vector_index::DEFAULT_INDEX_BYTES;
pub use self::writability::Writability;
use std::sync::Arc;

use crate::domain::{ResourceAllowance, RunRecord, RunTally};

/// Why a storage operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    /// The thread does not exist.
    #[error("thread `{0}` not found")]
    ThreadNotFound(String),
    /// A thread with this id already exists.
    #[error("thread `{0}` already exists")]
    ThreadExists(String),
    /// Working memory changed since it was read (a concurrent update); read again and retry.
    #[error("working memory of {scope} changed concurrently (expected version {expected}, found {found})")]
    VersionConflict {
        /// The working memory's scope, e.g. `resource user-1`.
        scope: String,
        /// The version the writer read.
        expected: u64,
        /// The version now stored.
        found: u64,
    },
    /// The vectors of a scope were made by another embedder; searching them with this one would
    /// return garbage.
    #[error("embedder mismatch: the store holds `{stored}` vectors, the query comes from `{requested}`")]
    EmbedderMismatch {
        /// The embedder id and dimension stored, e.g. `lexical-v1/384`.
        stored: String,
        /// The embedder id and dimension of the query.
        requested: String,
    },
    /// The data directory was written by an incompatible version of agentwire.
    #[error("the data directory has storage format {found}, this agentwire reads format {supported}")]
    UnsupportedFormat {
        /// The format found on disk.
        found: u32,
        /// The format this build reads and writes.
        supported: u32,
    },
    /// The PostgreSQL database holds a newer agentwire schema than this binary knows.
    #[error(
        "the database has agentwire schema version {found}, this agentwire knows versions up to {supported}: \
         run a newer agentwire (a rollback cannot read what the newer one wrote)"
    )]
    SchemaTooNew {
        /// The schema version in the database.
        found: u32,
        /// The newest version this build applies.
        supported: u32,
    },
    /// The database is out of space (PostgreSQL's SQLSTATE class 53): nothing was written.
    #[error("{0}")]
    OutOfSpace(String),
    /// A record on disk could not be decoded.
    #[error("corrupt record in `{tree}`: {reason}")]
    Corrupt {
        /// The sled tree.
        tree: &'static str,
        /// What could not be decoded.
        reason: String,
    },
    /// The disk under the store is nearly full: writes are refused before they reach it, and
    /// work again once space is freed.
    #[error(
        "the store's disk is nearly full ({} MiB free, writes need {} MiB: [storage] min_free_mb); \
         nothing was written, and writes resume once space is freed",
        free_bytes / MIB,
        min_free_bytes.div_ceil(MIB)
    )]
    DiskLow {
        /// Free bytes on the disk.
        free_bytes: u64,
        /// The reserve writes keep.
        min_free_bytes: u64,
    },
    /// The store could not write (e.g. the disk filled under it) and is reopening from what is
    /// on disk; it takes calls again once it can write.
    #[error("the store cannot write ({0}); it reopens once it can, and nothing unsaved is visible")]
    Unavailable(String),
    /// A save would take a resource past its quota. The caller is at fault.
    #[error(
        "resource `{resource_id}` is at its quota of {limit} {what} ({setting}; it keeps {used}): \
         nothing was saved; delete threads to make room"
    )]
    QuotaExceeded {
        /// The resource.
        resource_id: String,
        /// What ran out: `threads`, `messages`, `bytes of messages`.
        what: &'static str,
        /// The setting that limits it.
        setting: &'static str,
        /// What the resource keeps now.
        used: u64,
        /// The limit.
        limit: u64,
    },
    /// A write would create a resource past its API key's allowance. The caller is at fault.
    #[error(
        "key `{key_name}` has created {limit} resources (max_resources) and `{resource_id}` would be \
         one more: nothing was saved; delete one of its resources (DeleteResource) to make room"
    )]
    AllowanceExceeded {
        /// The key, by name.
        key_name: String,
        /// The resource it would create.
        resource_id: String,
        /// Its allowance.
        limit: u64,
    },
    /// The storage engine failed otherwise.
    #[error("storage failed: {0}")]
    Engine(String),
}

const MIB: u64 = 1024 * 1024;

/// Where agents keep their memory.
#[async_trait::async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Saves what a run added to a thread — its messages, their embeddings and a working memory
    /// update — creating the thread if needed. Messages already stored (same id in the resource)
    /// are skipped.
    /// Durable and atomic.
    async fn save_run(&self, save: RunSave) -> Result<(), StoreError>;

    /// Creates a thread; `ThreadExists` if the id is taken.
    async fn create_thread(&self, thread: NewThread) -> Result<Thread, StoreError>;

    /// The thread `thread_id` of `resource_id` (thread ids are a resource's own: another
    /// resource's thread of the same id is another thread).
    async fn get_thread(&self, resource_id: &str, thread_id: &str) -> Result<Option<Thread>, StoreError>;

    /// The threads of a resource, newest first, `limit` at a time after `cursor`.
    async fn list_threads(
        &self,
        resource_id: &str,
        cursor: &str,
        limit: usize,
    ) -> Result<ThreadPage, StoreError>;

    /// Changes a thread's title and metadata.
    async fn update_thread(
        &self,
        resource_id: &str,
        thread_id: &str,
        update: ThreadUpdate,
    ) -> Result<Thread, StoreError>;

    /// Deletes a thread with its messages, embeddings and thread working memory.
    async fn delete_thread(&self, resource_id: &str, thread_id: &str) -> Result<DeleteReport, StoreError>;

    /// Counts `resource_id` among the resources of `allowance`'s key, unless a key already has
    /// it; refused (`AllowanceExceeded`) when the key already has its `max_resources`. Deleting
    /// the resource gives it back.
    async fn claim_resource(
        &self,
        allowance: &ResourceAllowance,
        resource_id: &str,
    ) -> Result<(), StoreError>;

    /// Deletes every thread, message, embedding, working memory and run record of a resource.
    async fn delete_resource(&self, resource_id: &str) -> Result<DeleteReport, StoreError>;

    /// Keeps the records of ended runs (a record of a run already kept replaces it). Not durable
    /// when it returns: written within a moment (sled's periodic flush, PostgreSQL's WAL writer),
    /// so that records never cost a flush of their own; a crash loses the last instant's.
    async fn save_run_records(&self, records: Vec<RunRecord>) -> Result<(), StoreError>;

    /// Run records matching `filter`, newest first (by run id: ids are UUIDv7, in the order
    /// runs began), `limit` at a time after `cursor`.
    async fn list_run_records(
        &self,
        filter: &RunFilter,
        cursor: &str,
        limit: usize,
    ) -> Result<RunPage, StoreError>;

    /// What figures count of the newest `limit` runs matching `filter`, newest first. The newest
    /// runs' tallies are kept in memory, so a call decodes only the records it has not read yet.
    async fn run_tallies(&self, filter: &RunFilter, limit: usize) -> Result<Vec<Arc<RunTally>>, StoreError>;

    /// The record of run `run_id`.
    async fn get_run_record(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError>;

    /// Deletes the records of runs started before `before`, then all but the newest `keep`;
    /// how many it deleted.
    async fn prune_run_records(&self, before: Option<i64>, keep: Option<u64>) -> Result<u64, StoreError>;

    /// The last `limit` messages of a thread, oldest first.
    async fn last_messages(
        &self,
        resource_id: &str,
        thread_id: &str,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError>;

    /// A page of a thread's messages in either direction, `limit` at a time after `cursor`.
    async fn list_messages(
        &self,
        resource_id: &str,
        thread_id: &str,
        direction: Direction,
        cursor: &str,
        limit: usize,
    ) -> Result<MessagePage, StoreError>;

    /// The messages at `seqs` of a thread with `before` and `after` neighbours each, oldest
    /// first, without duplicates.
    async fn messages_around(
        &self,
        resource_id: &str,
        thread_id: &str,
        seqs: &[u64],
        before: usize,
        after: usize,
    ) -> Result<Vec<StoredMessage>, StoreError>;

    /// The stored messages most similar to a query vector, best first.
    async fn search(&self, query: VectorQuery) -> Result<Vec<Hit>, StoreError>;

    /// The working memory of a scope.
    async fn get_working_memory(
        &self,
        scope: &WorkingMemoryScope,
    ) -> Result<Option<WorkingMemoryRecord>, StoreError>;

    /// Writes working memory if its version is still `expected_version` (0: never written).
    /// Returns the new version; `VersionConflict` when someone wrote in between.
    async fn put_working_memory(
        &self,
        scope: &WorkingMemoryScope,
        content: String,
        expected_version: u64,
    ) -> Result<u64, StoreError>;

    /// What a resource keeps now (threads, messages, bytes of messages), as its quota counts it.
    async fn usage(&self, resource_id: &str) -> Result<ResourceUsage, StoreError>;

    /// What a resource keeps now, and whether its thread `thread_id` exists yet: what a run's
    /// quota is checked against before the model runs. One read where the backend can.
    async fn usage_with_thread(
        &self,
        resource_id: &str,
        thread_id: &str,
    ) -> Result<(ResourceUsage, bool), StoreError> {
        let thread = self.get_thread(resource_id, thread_id).await?;
        Ok((self.usage(resource_id).await?, thread.is_some()))
    }

    /// Bytes the store takes on disk, when it can tell (for metrics).
    fn size_bytes(&self) -> Option<u64> {
        None
    }

    /// Free bytes on the disk under the store, when it can tell (for metrics).
    fn free_bytes(&self) -> Option<u64> {
        None
    }

    /// Whether the store takes writes now, to watch (health, metrics); `None` for a store that
    /// always does.
    fn writability(&self) -> Option<tokio::sync::watch::Receiver<Writability>> {
        None
    }

    /// `Ok` when a write would be taken now: a run that would write is refused up front when not.
    fn check_writable(&self) -> Result<(), StoreError> {
        self.writability().map_or(Ok(()), |watched| watched.borrow().check())
    }

    /// A cached value of `scope`, unless it expired.
    async fn cache_get(&self, scope: &CacheScope, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Caches a value in `scope` until `expires_at` (milliseconds since the epoch). Unlike the
    /// other writes, not flushed at once: a crash may lose the newest entries (a cache miss),
    /// never half-write one. Deleting a resource or a thread deletes its scope's entries.
    async fn cache_put(
        &self,
        scope: &CacheScope,
        key: &str,
        value: Vec<u8>,
        expires_at: i64,
    ) -> Result<(), StoreError>;
}
