//! [`SledStore`]: the store in an embedded sled database in the server's data directory.
//!
//! Trees: `threads` (resource | id → thread), `resource_threads` (resource | created_at | thread → ()),
//! `messages` (resource | thread | seq → message), `resource_message_ids` (resource | id → message key), `vectors`
//! (resource | thread | seq → a pointer into the vector file, `vector_file.rs`, or an f32 vector inline), `working_memory` (scope → record), `resource_usage` (resource → threads, messages, bytes, for quotas), `resource_owners` and `key_resources` (which key created each resource, for keys' `max_resources`: `sled_store/owners.rs`), `response_cache`
//! (scope | key → expiry and value), `run_pages` and `run_page_index` (run records, a page per batch in segment files:
//! `sled_store/run_pages.rs`), `meta` (format version, embedder). Multi-tree writes are one sled transaction; sled calls run on blocking
//! threads; writes return once group-committed to disk, and the runs saved meanwhile share one
//! transaction (`sled_store/saves.rs`, `sled_store/group_commit.rs`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError, TransactionalTree};

use super::reopening::Reopening;
use super::sled_codec::{decode, encode, engine, open_waiting_for_lock};
use super::upgrade;

mod group_commit;
mod owners;
mod run_pages;
mod runs;
mod saves;
use super::run_segments::RunSegments;
use super::run_tallies::TallyCache;
use super::vector_codes::dot;
use super::vector_file::{VectorFile, stored_dimension};
use super::vector_index::{DEFAULT_INDEX_BYTES, SharedIndex, VectorSource};
use super::vector_scratch::ScratchWriter;
use super::vectors::{CANDIDATES_PER_HIT, Candidate, EXACT_PER_HIT, ResourceVectors, TopK, best_hits};
use super::{
    CacheScope, DeleteReport, Direction, Hit, MessagePage, NewThread, RecallScope, ResourceUsage, RunFilter,
    RunPage, RunSave, Store, StoreError, StoredMessage, Thread, ThreadPage, ThreadUpdate, VectorQuery,
    WorkingMemoryRecord, WorkingMemoryScope, Writability, check_quota, keys,
};
use crate::domain::{Message, ResourceAllowance, RunRecord, RunTally, now_millis};
use group_commit::GroupCommit;
use saves::{PendingSave, Pointers, Saves};

use super::keys::META_EMBEDDER;

/// The page cache of a store opened with [`SledStore::open`]: 16 MiB, as `[storage] cache_mb`.
pub const DEFAULT_CACHE_BYTES: u64 = 16 * 1024 * 1024;

/// The free space writes keep on the store's disk unless configured: 128 MiB (`[storage]
/// min_free_mb` defaults to the same).
pub const DEFAULT_MIN_FREE_BYTES: u64 = 128 * 1024 * 1024;

/// The store, in a sled database. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SledStore {
    engine: Arc<Reopening<Inner>>,
    /// The recall budget, kept for a reopened database.
    recall_budget: Arc<AtomicUsize>,
}

#[derive(Debug)]
struct Inner {
    db: sled::Db,
    response_cache: sled::Tree,
    /// Cache writes so far: every [`CACHE_SWEEP_EVERY`]th sweeps out expired entries.
    cache_puts: AtomicU64,
    meta: sled::Tree,
    group_commit: GroupCommit,
    /// The trees a run's save writes (threads, messages, vectors and the file they point into,
    /// working memory, each resource's usage) and the recall index kept in step with them,
    /// shared with the committing thread.
    saves: Arc<Saves>,
    /// Run records (`runs.rs`): pages of records, each page's runs, and where each run is
    /// (built on first use).
    run_pages: sled::Tree,
    run_page_index: sled::Tree,
    run_index: Mutex<Option<run_pages::RunIndex>>,
    /// The pages of run records the `run_pages` tree points into.
    run_segments: RunSegments,
    /// The newest runs' tallies, read from their records once.
    run_tallies: TallyCache,
    /// Which key created each resource, and how many each key has (`owners.rs`).
    resource_owners: sled::Tree,
    key_resources: sled::Tree,
}

/// The thread id and seq of a `vectors` key.
fn parse_vector_key(key: &[u8]) -> Result<(String, u64), StoreError> {
    keys::parse_vector_key(key)
        .ok_or_else(|| StoreError::Corrupt { tree: "vectors", reason: "malformed key".to_owned() })
}

/// Turns a transaction's outcome into ours: an abort carries our error.
fn transaction<T>(outcome: Result<T, TransactionError<StoreError>>) -> Result<T, StoreError> {
    outcome.map_err(|error| match error {
        TransactionError::Abort(error) => error,
        TransactionError::Storage(error) => engine(error),
    })
}

fn abort<T>(error: StoreError) -> Result<T, ConflictableTransactionError<StoreError>> {
    Err(ConflictableTransactionError::Abort(error))
}

fn read_thread(
    tree: &TransactionalTree,
    resource_id: &str,
    thread_id: &str,
) -> Result<Option<Thread>, ConflictableTransactionError<StoreError>> {
    match tree.get(keys::thread(resource_id, thread_id))? {
        Some(bytes) => match decode("threads", &bytes) {
            Ok(thread) => Ok(Some(thread)),
            Err(error) => abort(error),
        },
        None => Ok(None),
    }
}

/// What a resource keeps, as its `resource_usage` key holds it (nothing yet: zero).
fn read_usage(
    tree: &TransactionalTree,
    key: &[u8],
) -> Result<ResourceUsage, ConflictableTransactionError<StoreError>> {
    Ok(tree.get(key)?.map(|bytes| ResourceUsage::decode(&bytes)).unwrap_or_default())
}

/// Checks a working-memory write against the stored version and returns the new record.
fn next_working_memory(
    tree: &TransactionalTree,
    scope: &WorkingMemoryScope,
    content: &str,
    expected_version: u64,
) -> Result<WorkingMemoryRecord, ConflictableTransactionError<StoreError>> {
    let found = match tree.get(keys::working_memory(scope))? {
        Some(bytes) => match decode::<WorkingMemoryRecord>("working_memory", &bytes) {
            Ok(record) => record.version,
            Err(error) => return abort(error),
        },
        None => 0,
    };
    if found != expected_version {
        return abort(StoreError::VersionConflict {
            scope: scope.to_string(),
            expected: expected_version,
            found,
        });
    }
    Ok(WorkingMemoryRecord { content: content.to_owned(), version: found + 1, updated_at: now_millis() })
}

impl SledStore {
    /// Opens (or creates) the store in `path`, checking its format version, with sled's page
    /// cache at [`DEFAULT_CACHE_BYTES`].
    pub fn open(path: &Path) -> Result<SledStore, StoreError> {
        SledStore::open_with_cache(path, DEFAULT_CACHE_BYTES)
    }

    /// Caps the memory of recall's in-memory vectors at `bytes`: the least recently searched
    /// resources are dropped past it, and loaded again from disk when searched.
    pub fn set_recall_budget(&self, bytes: usize) {
        self.recall_budget.store(bytes, Ordering::Relaxed);
        if let Some(inner) = self.engine.current() {
            inner.saves.index.lock().set_budget(bytes);
        }
    }

    /// Refuses writes (runs, threads, working memory) while less than `bytes` are free on the
    /// store's disk, so that the database never fills it (default [`DEFAULT_MIN_FREE_BYTES`]).
    pub fn set_min_free_bytes(&self, bytes: u64) {
        self.engine.set_min_free_bytes(bytes);
    }

    /// The memory recall's in-memory vectors take now, in bytes.
    pub fn recall_index_bytes(&self) -> usize {
        self.engine.current().map_or(0, |inner| inner.saves.index.lock().bytes())
    }

    /// [`SledStore::open`] with a page cache of `cache_bytes` (sled's own default, 1 GiB, lets
    /// the server's memory grow with its data).
    pub fn open_with_cache(path: &Path, cache_bytes: u64) -> Result<SledStore, StoreError> {
        let recall_budget = Arc::new(AtomicUsize::new(DEFAULT_INDEX_BYTES));
        let budget = Arc::clone(&recall_budget);
        let at = path.to_owned();
        let opener = Box::new(move || Inner::open(&at, cache_bytes, budget.load(Ordering::Relaxed)));
        super::compaction::finish_interrupted(path)?;
        std::fs::create_dir_all(path).map_err(|error| {
            StoreError::Unavailable(format!("cannot create `{}`: {error}", path.display()))
        })?;
        let engine = Reopening::open(path.to_owned(), opener, DEFAULT_MIN_FREE_BYTES)?;
        Ok(SledStore { engine, recall_budget })
    }

    /// Runs a sled operation on a blocking thread.
    async fn blocking<T, F>(&self, operation: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, StoreError> + Send + 'static,
    {
        self.blocking_on(self.engine.engine()?, operation).await
    }

    /// Runs a sled operation on `inner` on a blocking thread. An IO error closes the database,
    /// to be reopened from disk (see [`Reopening`]).
    async fn blocking_on<T, F>(&self, inner: Arc<Inner>, operation: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, StoreError> + Send + 'static,
    {
        let held = Arc::clone(&inner);
        let outcome = tokio::task::spawn_blocking(move || operation(&held))
            .await
            .map_err(|error| StoreError::Engine(format!("storage task failed: {error}")))
            .and_then(|outcome| outcome);
        if let Err(StoreError::Unavailable(reason)) = &outcome {
            self.engine.failed(&inner, reason);
        }
        outcome
    }

    /// Runs a write on a blocking thread and returns once it is on disk. Refused while the disk
    /// is nearly full, unless `frees_space` (deletes make room).
    async fn durable_write<T, F>(&self, frees_space: bool, operation: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, StoreError> + Send + 'static,
    {
        match self.engine.check_space() {
            Err(StoreError::DiskLow { .. }) if frees_space => {}
            checked => checked?,
        }
        let inner = self.engine.engine()?;
        let outcome = self.blocking_on(Arc::clone(&inner), operation).await?;
        self.committed(&inner, inner.group_commit.durable()).await?;
        Ok(outcome)
    }

    /// Waits for the committing thread's answer; one saying the engine cannot write closes the
    /// database until it reopens.
    async fn committed(
        &self,
        inner: &Arc<Inner>,
        commit: impl Future<Output = Result<(), StoreError>>,
    ) -> Result<(), StoreError> {
        let committed = commit.await;
        if let Err(StoreError::Unavailable(reason)) = &committed {
            self.engine.failed(inner, reason);
        }
        committed
    }

    /// Writes everything to disk (runs' writes already are; this catches the rest, e.g. cache
    /// entries). The server calls it on its way out.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.engine.engine()?.db.flush().map(|_| ()).map_err(engine)
    }

    /// Bytes on disk, for operators.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.engine.engine()?.db.size_on_disk().map_err(engine)
    }
}

impl Inner {
    /// Opens the database in `path`, checks its format version (upgrading an older one) and
    /// proves it can write.
    fn open(path: &Path, cache_bytes: u64, recall_budget: usize) -> Result<Inner, StoreError> {
        let db = open_waiting_for_lock(path, cache_bytes)?;
        let meta = db.open_tree("meta").map_err(engine)?;
        match meta.get(keys::META_FORMAT).map_err(engine)? {
            Some(bytes) => {
                let found = u32::from_be_bytes(bytes.as_ref().try_into().map_err(|_| {
                    StoreError::Corrupt { tree: "meta", reason: "format version is not 4 bytes".to_owned() }
                })?);
                if found == 1 {
                    // Closed first: the upgrade rewrites the store beside itself and swaps it in.
                    drop((meta, db));
                    upgrade::from_format_1(path)?;
                    return Inner::open(path, cache_bytes, recall_budget);
                }
                if found == keys::FORMAT_INLINE_VECTORS {
                    // Format 3 reads format 2's inline vectors as they are.
                    meta.insert(keys::META_FORMAT, &keys::FORMAT_VERSION.to_be_bytes()).map_err(engine)?;
                } else if found != keys::FORMAT_VERSION {
                    return Err(StoreError::UnsupportedFormat { found, supported: keys::FORMAT_VERSION });
                }
            }
            None => {
                meta.insert(keys::META_FORMAT, &keys::FORMAT_VERSION.to_be_bytes()).map_err(engine)?;
            }
        }
        // The probe: a database that cannot make a small write durable is not open.
        meta.insert(keys::META_OPENED, &now_millis().to_be_bytes()).map_err(engine)?;
        db.flush().map_err(engine)?;
        let tree = |name: &str| db.open_tree(name).map_err(engine);
        let vector_file = Arc::new(VectorFile::open(path, stored_dimension(&meta)?)?);
        let index = Arc::new(SharedIndex::new(recall_budget, Some(path)));
        let saves = Arc::new(Saves {
            threads: tree("threads")?,
            resource_threads: tree("resource_threads")?,
            messages: tree("messages")?,
            message_ids: tree("resource_message_ids")?,
            vectors: tree("vectors")?,
            working_memory: tree("working_memory")?,
            usage: tree("resource_usage")?,
            vector_file: Arc::clone(&vector_file),
            index: Arc::clone(&index),
        });
        Ok(Inner {
            response_cache: tree("response_cache")?,
            run_pages: tree("run_pages")?,
            run_page_index: tree("run_page_index")?,
            run_index: Mutex::new(None),
            run_segments: RunSegments::open(path)?,
            run_tallies: TallyCache::default(),
            resource_owners: tree("resource_owners")?,
            key_resources: tree("key_resources")?,
            cache_puts: AtomicU64::new(0),
            group_commit: GroupCommit::start(db.clone(), vector_file, Arc::clone(&saves))?,
            saves,
            meta,
            db,
        })
    }
}

impl Inner {
    fn check_embedder(&self, embedder: &str, dimension: usize) -> Result<(), StoreError> {
        let requested = format!("{embedder}/{dimension}");
        match self.meta.get(META_EMBEDDER).map_err(engine)? {
            Some(stored) if stored.as_ref() == requested.as_bytes() => Ok(()),
            Some(stored) => Err(StoreError::EmbedderMismatch {
                stored: String::from_utf8_lossy(&stored).into_owned(),
                requested,
            }),
            None => {
                // The first vectors ever written decide the store's embedder.
                let claimed = self
                    .meta
                    .compare_and_swap(META_EMBEDDER, None as Option<&[u8]>, Some(requested.as_bytes()))
                    .map_err(engine)?;
                // Another writer claimed it first: check against theirs.
                claimed.or_else(|_| self.check_embedder(embedder, dimension))
            }
        }
    }

    /// Writes a save's vectors into the vector file (its embedder checked), ahead of the
    /// transaction that points to them.
    fn write_vectors(&self, save: &RunSave) -> Result<Pointers, StoreError> {
        let Some(first) = save.embeddings.first() else { return Ok(Vec::new()) };
        self.check_embedder(&first.embedder, first.vector.len())?;
        self.saves.vector_file.set_dimension(first.vector.len())?;
        let mut pointers = Vec::with_capacity(save.embeddings.len());
        for embedding in &save.embeddings {
            match self.saves.vector_file.write(&embedding.vector) {
                Ok(pointer) => pointers.push(pointer),
                Err(error) => {
                    saves::release_slots(&self.saves.vector_file, &pointers, &[]);
                    return Err(error);
                }
            }
        }
        Ok(pointers)
    }

    fn get_thread(&self, resource_id: &str, thread_id: &str) -> Result<Option<Thread>, StoreError> {
        match self.saves.threads.get(keys::thread(resource_id, thread_id)).map_err(engine)? {
            Some(bytes) => decode("threads", &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn thread(&self, resource_id: &str, thread_id: &str) -> Result<Thread, StoreError> {
        self.get_thread(resource_id, thread_id)?
            .ok_or_else(|| StoreError::ThreadNotFound(thread_id.to_owned()))
    }

    fn create_thread(&self, new: NewThread) -> Result<Thread, StoreError> {
        let now = now_millis();
        let thread = new.made_at(now);
        let trees = (&self.saves.threads, &self.saves.resource_threads, &self.saves.usage);
        transaction(trees.transaction(|(threads, resource_threads, usage)| {
            if threads.get(keys::thread(&thread.resource_id, &thread.id))?.is_some() {
                return abort(StoreError::ThreadExists(thread.id.clone()));
            }
            let usage_key = keys::resource_usage(&thread.resource_id);
            let before = read_usage(usage, &usage_key)?;
            let after = before.plus(ResourceUsage { threads: 1, ..Default::default() });
            if let Err(error) = check_quota(&new.quota, &thread.resource_id, before, after) {
                return abort(error);
            }
            usage.insert(usage_key, &after.encode())?;
            threads.insert(keys::thread(&thread.resource_id, &thread.id), encode(&thread))?;
            resource_threads.insert(keys::resource_thread(&thread.resource_id, now, &thread.id), &[])?;
            Ok(())
        }))?;
        Ok(thread)
    }

    fn list_threads(&self, resource_id: &str, cursor: &str, limit: usize) -> Result<ThreadPage, StoreError> {
        let prefix = keys::resource_threads_prefix(resource_id);
        let entries = self.saves.resource_threads.scan_prefix(&prefix).rev();
        let after = keys::decode_cursor(cursor).unwrap_or_default();
        let mut threads = Vec::new();
        let mut last_key = Vec::new();
        for entry in entries {
            let (key, _) = entry.map_err(engine)?;
            if !after.is_empty() && key.as_ref() >= after.as_slice() {
                continue;
            }
            if threads.len() == limit {
                return Ok(ThreadPage { threads, next_cursor: keys::encode_cursor(&last_key) });
            }
            let thread_id = String::from_utf8_lossy(&key[prefix.len() + 8 + 2..]).into_owned();
            if let Some(thread) = self.get_thread(resource_id, &thread_id)? {
                threads.push(thread);
            }
            last_key = key.to_vec();
        }
        Ok(ThreadPage { threads, next_cursor: String::new() })
    }

    fn update_thread(
        &self,
        resource_id: &str,
        thread_id: &str,
        update: ThreadUpdate,
    ) -> Result<Thread, StoreError> {
        transaction(self.saves.threads.transaction(|threads| {
            let Some(mut thread) = read_thread(threads, resource_id, thread_id)? else {
                return abort(StoreError::ThreadNotFound(thread_id.to_owned()));
            };
            if let Some(title) = &update.title {
                thread.title.clone_from(title);
            }
            if let Some(metadata) = &update.metadata {
                thread.metadata.clone_from(metadata);
            }
            thread.updated_at = now_millis();
            threads.insert(keys::thread(resource_id, thread_id), encode(&thread))?;
            Ok(thread)
        }))
    }

    fn delete_thread(&self, resource_id: &str, thread_id: &str) -> Result<DeleteReport, StoreError> {
        let thread = self.thread(resource_id, thread_id)?;
        let mut message_keys = Vec::new();
        let mut message_ids = Vec::new();
        let mut removed = ResourceUsage { threads: 1, ..Default::default() };
        for entry in self.saves.messages.scan_prefix(keys::messages_prefix(resource_id, thread_id)) {
            let (key, value) = entry.map_err(engine)?;
            message_ids.push(decode::<Message>("messages", &value)?.id);
            message_keys.push(key);
            removed.messages += 1;
            removed.bytes += value.len() as u64;
        }
        let mut vector_keys = Vec::new();
        let mut vector_values = Vec::new();
        for entry in self.saves.vectors.scan_prefix(keys::thread_vectors_prefix(resource_id, thread_id)) {
            let (key, value) = entry.map_err(engine)?;
            removed.bytes += self.saves.vector_file.stored_bytes(&value);
            vector_keys.push(key);
            vector_values.push(value);
        }
        let thread_scope = WorkingMemoryScope::Thread {
            resource_id: resource_id.to_owned(),
            thread_id: thread_id.to_owned(),
        };
        let had_working_memory =
            self.saves.working_memory.contains_key(keys::working_memory(&thread_scope)).map_err(engine)?;
        let trees = self.saves.trees();
        transaction(trees.transaction(
            |(threads, resource_threads, messages, ids, vectors, working_memory, usage)| {
                let usage_key = keys::resource_usage(resource_id);
                let before = read_usage(usage, &usage_key)?;
                usage.insert(usage_key, &before.minus(removed).encode())?;
                threads.remove(keys::thread(resource_id, thread_id))?;
                resource_threads.remove(keys::resource_thread(resource_id, thread.created_at, thread_id))?;
                for key in &message_keys {
                    messages.remove(key)?;
                }
                for id in &message_ids {
                    ids.remove(keys::message_id(resource_id, id))?;
                }
                for key in &vector_keys {
                    vectors.remove(key)?;
                }
                working_memory.remove(keys::working_memory(&thread_scope))?;
                Ok(())
            },
        ))?;
        for value in &vector_values {
            self.saves.vector_file.deleted(value);
        }
        self.saves.index.lock().thread_deleted(resource_id, thread_id);
        self.clear_cache_scope(&CacheScope::Thread {
            resource_id: resource_id.to_owned(),
            thread_id: thread_id.to_owned(),
        })?;
        Ok(DeleteReport {
            threads: 1,
            messages: message_keys.len() as u64,
            embeddings: vector_keys.len() as u64,
            working_memories: u64::from(had_working_memory),
        })
    }

    fn delete_resource(&self, resource_id: &str) -> Result<DeleteReport, StoreError> {
        let mut report = DeleteReport::default();
        loop {
            let page = self.list_threads(resource_id, "", 100)?;
            if page.threads.is_empty() {
                break;
            }
            for thread in page.threads {
                report.add(self.delete_thread(resource_id, &thread.id)?);
            }
        }
        let scope = WorkingMemoryScope::Resource(resource_id.to_owned());
        if self.saves.working_memory.remove(keys::working_memory(&scope)).map_err(engine)?.is_some() {
            report.working_memories += 1;
        }
        self.saves.usage.remove(keys::resource_usage(resource_id)).map_err(engine)?;
        self.saves.index.lock().remove(resource_id);
        self.clear_cache_scope(&CacheScope::Resource(resource_id.to_owned()))?;
        self.delete_resource_runs(resource_id)?;
        self.release_resource(resource_id)?;
        Ok(report)
    }

    fn usage(&self, resource_id: &str) -> Result<ResourceUsage, StoreError> {
        let stored = self.saves.usage.get(keys::resource_usage(resource_id)).map_err(engine)?;
        Ok(stored.map(|bytes| ResourceUsage::decode(&bytes)).unwrap_or_default())
    }

    fn stored_message(key: &[u8], value: &[u8]) -> Result<StoredMessage, StoreError> {
        Ok(StoredMessage { seq: keys::seq_of_message_key(key), message: decode("messages", value)? })
    }

    fn last_messages(
        &self,
        resource_id: &str,
        thread_id: &str,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let mut messages = Vec::with_capacity(limit);
        for entry in
            self.saves.messages.scan_prefix(keys::messages_prefix(resource_id, thread_id)).rev().take(limit)
        {
            let (key, value) = entry.map_err(engine)?;
            messages.push(Inner::stored_message(&key, &value)?);
        }
        messages.reverse();
        Ok(messages)
    }

    fn list_messages(
        &self,
        resource_id: &str,
        thread_id: &str,
        direction: Direction,
        cursor: &str,
        limit: usize,
    ) -> Result<MessagePage, StoreError> {
        let prefix = keys::messages_prefix(resource_id, thread_id);
        let after = keys::decode_cursor(cursor).unwrap_or_default();
        let entries: Box<dyn Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>> = match direction {
            Direction::Forward => Box::new(self.saves.messages.scan_prefix(&prefix)),
            Direction::Backward => Box::new(self.saves.messages.scan_prefix(&prefix).rev()),
        };
        let mut messages = Vec::new();
        for entry in entries {
            let (key, value) = entry.map_err(engine)?;
            let passed = match direction {
                Direction::Forward => key.as_ref() <= after.as_slice(),
                Direction::Backward => key.as_ref() >= after.as_slice(),
            };
            if !after.is_empty() && passed {
                continue;
            }
            if messages.len() == limit {
                let last: &StoredMessage = messages.last().expect("limit is positive");
                let next_cursor = keys::encode_cursor(&keys::message(resource_id, thread_id, last.seq));
                return Ok(MessagePage { messages, next_cursor });
            }
            messages.push(Inner::stored_message(&key, &value)?);
        }
        Ok(MessagePage { messages, next_cursor: String::new() })
    }

    fn messages_around(
        &self,
        resource_id: &str,
        thread_id: &str,
        seqs: &[u64],
        before: usize,
        after: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let mut found: BTreeMap<u64, StoredMessage> = BTreeMap::new();
        for &seq in seqs {
            let start = keys::message(resource_id, thread_id, seq.saturating_sub(before as u64));
            let end = keys::message(resource_id, thread_id, seq.saturating_add(after as u64));
            for entry in self.saves.messages.range(start..=end) {
                let (key, value) = entry.map_err(engine)?;
                let stored = Inner::stored_message(&key, &value)?;
                found.entry(stored.seq).or_insert(stored);
            }
        }
        Ok(found.into_values().collect())
    }

    fn search(&self, query: &VectorQuery) -> Result<Vec<Hit>, StoreError> {
        let (resource_id, thread) = match &query.scope {
            RecallScope::Resource(resource_id) => (resource_id.clone(), None),
            RecallScope::Thread { resource_id, thread_id } => (resource_id.clone(), Some(thread_id.as_str())),
        };
        match self.meta.get(META_EMBEDDER).map_err(engine)? {
            None => return Ok(Vec::new()),
            Some(_) => self.check_embedder(&query.embedder, query.vector.len())?,
        }
        let wanted = query.top_k.saturating_mul(CANDIDATES_PER_HIT);
        let source = StoredVectors { inner: self, resource_id: &resource_id };
        let candidates = self.saves.index.search(&resource_id, &source, |loaded, scratch| {
            loaded.candidates(&query.vector, wanted, thread, scratch)
        })?;
        let scored = match candidates {
            Some(candidates) => self.rescored(&resource_id, &query.vector, candidates, query.top_k)?,
            // Too large for the budget: an exact scan on disk.
            None => self.scan_on_disk(&resource_id, thread, query)?,
        };
        Ok(best_hits(scored, query.top_k, query.threshold))
    }

    /// The exact scores of the best candidates, from their stored vectors: those the scratch
    /// file scored, only the best [`EXACT_PER_HIT`] per hit by that score; those it did not, all
    /// (one deleted since the scan is left out).
    fn rescored(
        &self,
        resource_id: &str,
        query: &[f32],
        candidates: Vec<Candidate>,
        top_k: usize,
    ) -> Result<Vec<(String, u64, f32)>, StoreError> {
        let mut best = TopK::new(top_k.saturating_mul(EXACT_PER_HIT));
        let mut exact = Vec::new();
        for (thread_id, seq, approximate) in candidates {
            match approximate {
                Some(score) => best.offer(score, (thread_id, seq)),
                None => exact.push((thread_id, seq)),
            }
        }
        exact.extend(best.into_sorted().into_iter().map(|(_, candidate)| candidate));
        let mut scored = Vec::with_capacity(exact.len());
        for (thread_id, seq) in exact {
            let value = self.saves.vectors.get(keys::vector(resource_id, &thread_id, seq)).map_err(engine)?;
            if let Some(vector) =
                value.map(|value| self.saves.vector_file.read(&value)).transpose()?.flatten()
            {
                scored.push((thread_id, seq, dot(query, &vector)));
            }
        }
        Ok(scored)
    }

    /// The exact scores of a resource's (or one of its threads') best vectors, read from disk:
    /// the search of a resource whose codes do not fit the recall budget.
    fn scan_on_disk(
        &self,
        resource_id: &str,
        thread: Option<&str>,
        query: &VectorQuery,
    ) -> Result<Vec<(String, u64, f32)>, StoreError> {
        let prefix = match thread {
            Some(thread_id) => keys::thread_vectors_prefix(resource_id, thread_id),
            None => keys::vectors_prefix(resource_id),
        };
        let mut best = TopK::new(query.top_k);
        self.each_vector(prefix, |key, vector| {
            let score = dot(&query.vector, vector);
            if best.admits(score) {
                best.offer(score, parse_vector_key(key)?);
            }
            Ok(true)
        })?;
        Ok(best.into_sorted().into_iter().map(|(score, (thread_id, seq))| (thread_id, seq, score)).collect())
    }

    /// Each stored vector under `prefix` of the `vectors` tree, with its key, until `each` says
    /// stop; whether it went through them all.
    fn each_vector(
        &self,
        prefix: Vec<u8>,
        mut each: impl FnMut(&[u8], &[f32]) -> Result<bool, StoreError>,
    ) -> Result<bool, StoreError> {
        for entry in self.saves.vectors.scan_prefix(prefix) {
            let (key, value) = entry.map_err(engine)?;
            let Some(vector) = self.saves.vector_file.read(&value)? else { continue };
            if !each(&key, &vector)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn get_working_memory(
        &self,
        scope: &WorkingMemoryScope,
    ) -> Result<Option<WorkingMemoryRecord>, StoreError> {
        match self.saves.working_memory.get(keys::working_memory(scope)).map_err(engine)? {
            Some(bytes) => decode("working_memory", &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn put_working_memory(
        &self,
        scope: &WorkingMemoryScope,
        content: &str,
        expected_version: u64,
    ) -> Result<u64, StoreError> {
        transaction(self.saves.working_memory.transaction(|tree| {
            let record = next_working_memory(tree, scope, content, expected_version)?;
            tree.insert(keys::working_memory(scope), encode(&record))?;
            Ok(record.version)
        }))
    }

    fn cache_get(&self, scope: &CacheScope, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let entry = keys::cache(scope, key);
        let Some(bytes) = self.response_cache.get(&entry).map_err(engine)? else { return Ok(None) };
        let (expires_at, value) = cache_entry(&bytes)?;
        if expires_at <= now_millis() {
            self.response_cache.remove(entry).map_err(engine)?;
            return Ok(None);
        }
        Ok(Some(value.to_vec()))
    }

    fn cache_put(
        &self,
        scope: &CacheScope,
        key: &str,
        value: &[u8],
        expires_at: i64,
    ) -> Result<(), StoreError> {
        let mut bytes = Vec::with_capacity(8 + value.len());
        bytes.extend_from_slice(&u64::try_from(expires_at).unwrap_or(0).to_be_bytes());
        bytes.extend_from_slice(value);
        self.response_cache.insert(keys::cache(scope, key), bytes).map_err(engine)?;
        if self.cache_puts.fetch_add(1, Ordering::Relaxed) % CACHE_SWEEP_EVERY == CACHE_SWEEP_EVERY - 1 {
            self.sweep_cache()?;
        }
        Ok(())
    }

    /// Removes every expired cache entry.
    fn sweep_cache(&self) -> Result<(), StoreError> {
        let now = now_millis();
        for item in self.response_cache.iter() {
            let (entry, bytes) = item.map_err(engine)?;
            if cache_entry(&bytes)?.0 <= now {
                self.response_cache.remove(entry).map_err(engine)?;
            }
        }
        Ok(())
    }

    /// Removes every cache entry of a scope.
    fn clear_cache_scope(&self, scope: &CacheScope) -> Result<(), StoreError> {
        for item in self.response_cache.scan_prefix(keys::cache_prefix(scope)) {
            let (entry, _) = item.map_err(engine)?;
            self.response_cache.remove(entry).map_err(engine)?;
        }
        Ok(())
    }
}

/// Cache writes between two sweeps of expired entries.
const CACHE_SWEEP_EVERY: u64 = 1024;

/// A `response_cache` value: its expiry and the cached bytes.
fn cache_entry(bytes: &[u8]) -> Result<(i64, &[u8]), StoreError> {
    let Some((expiry, value)) = bytes.split_first_chunk::<8>() else {
        return Err(StoreError::Corrupt {
            tree: "response_cache",
            reason: "entry shorter than its expiry".to_owned(),
        });
    };
    Ok((i64::try_from(u64::from_be_bytes(*expiry)).unwrap_or(i64::MAX), value))
}

/// About what `save` writes: its messages, embeddings and working memory.
fn save_bytes(save: &RunSave) -> u64 {
    let messages: usize = save.messages.iter().map(Message::payload_bytes).sum();
    let embeddings: usize = save.embeddings.iter().map(|embedding| embedding.vector.len() * 4).sum();
    let working_memory = save.working_memory.as_ref().map_or(0, |(_, content, _)| content.len());
    u64::try_from(messages + embeddings + working_memory).unwrap_or(u64::MAX)
}

#[async_trait::async_trait]
impl Store for SledStore {
    async fn save_run(&self, save: RunSave) -> Result<(), StoreError> {
        let _room = self.engine.room_for(save_bytes(&save))?;
        let inner = self.engine.engine()?;
        let (save, pointers) = if save.embeddings.is_empty() {
            (save, Vec::new())
        } else {
            self.blocking_on(Arc::clone(&inner), move |inner| {
                let pointers = inner.write_vectors(&save)?;
                Ok((save, pointers))
            })
            .await?
        };
        self.committed(&inner, inner.group_commit.save(PendingSave { save, pointers })).await
    }

    async fn create_thread(&self, thread: NewThread) -> Result<Thread, StoreError> {
        self.durable_write(false, move |inner| inner.create_thread(thread)).await
    }

    async fn get_thread(&self, resource_id: &str, thread_id: &str) -> Result<Option<Thread>, StoreError> {
        let (resource_id, thread_id) = (resource_id.to_owned(), thread_id.to_owned());
        self.blocking(move |inner| inner.get_thread(&resource_id, &thread_id)).await
    }

    async fn list_threads(
        &self,
        resource_id: &str,
        cursor: &str,
        limit: usize,
    ) -> Result<ThreadPage, StoreError> {
        let (resource_id, cursor) = (resource_id.to_owned(), cursor.to_owned());
        self.blocking(move |inner| inner.list_threads(&resource_id, &cursor, limit)).await
    }

    async fn update_thread(
        &self,
        resource_id: &str,
        thread_id: &str,
        update: ThreadUpdate,
    ) -> Result<Thread, StoreError> {
        let (resource_id, thread_id) = (resource_id.to_owned(), thread_id.to_owned());
        self.durable_write(false, move |inner| inner.update_thread(&resource_id, &thread_id, update)).await
    }

    async fn delete_thread(&self, resource_id: &str, thread_id: &str) -> Result<DeleteReport, StoreError> {
        let (resource_id, thread_id) = (resource_id.to_owned(), thread_id.to_owned());
        self.durable_write(true, move |inner| inner.delete_thread(&resource_id, &thread_id)).await
    }

    async fn claim_resource(
        &self,
        allowance: &ResourceAllowance,
        resource_id: &str,
    ) -> Result<(), StoreError> {
        // Not durable on its own: the save that follows is, and sled's log makes what came
        // before it durable with it; a claim lost without one counted nothing kept.
        self.engine.check_space()?;
        let (allowance, resource_id) = (allowance.clone(), resource_id.to_owned());
        self.blocking(move |inner| inner.claim_resource(&allowance, &resource_id)).await
    }

    async fn delete_resource(&self, resource_id: &str) -> Result<DeleteReport, StoreError> {
        let resource_id = resource_id.to_owned();
        self.durable_write(true, move |inner| inner.delete_resource(&resource_id)).await
    }

    async fn save_run_records(&self, records: Vec<RunRecord>) -> Result<(), StoreError> {
        self.engine.check_space()?;
        self.blocking(move |inner| inner.save_run_records(&records)).await
    }

    async fn list_run_records(
        &self,
        filter: &RunFilter,
        cursor: &str,
        limit: usize,
    ) -> Result<RunPage, StoreError> {
        let (filter, cursor) = (filter.clone(), cursor.to_owned());
        self.blocking(move |inner| inner.list_run_records(&filter, &cursor, limit)).await
    }

    async fn run_tallies(&self, filter: &RunFilter, limit: usize) -> Result<Vec<Arc<RunTally>>, StoreError> {
        let filter = filter.clone();
        self.blocking(move |inner| inner.run_tallies(&filter, limit)).await
    }

    async fn get_run_record(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let run_id = run_id.to_owned();
        self.blocking(move |inner| inner.get_run_record(&run_id)).await
    }

    async fn prune_run_records(&self, before: Option<i64>, keep: Option<u64>) -> Result<u64, StoreError> {
        self.durable_write(true, move |inner| inner.prune_run_records(before, keep)).await
    }

    async fn last_messages(
        &self,
        resource_id: &str,
        thread_id: &str,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let (resource_id, thread_id) = (resource_id.to_owned(), thread_id.to_owned());
        self.blocking(move |inner| inner.last_messages(&resource_id, &thread_id, limit)).await
    }

    async fn list_messages(
        &self,
        resource_id: &str,
        thread_id: &str,
        direction: Direction,
        cursor: &str,
        limit: usize,
    ) -> Result<MessagePage, StoreError> {
        let (resource_id, thread_id, cursor) =
            (resource_id.to_owned(), thread_id.to_owned(), cursor.to_owned());
        self.blocking(move |inner| inner.list_messages(&resource_id, &thread_id, direction, &cursor, limit))
            .await
    }

    async fn messages_around(
        &self,
        resource_id: &str,
        thread_id: &str,
        seqs: &[u64],
        before: usize,
        after: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let (resource_id, thread_id, seqs) = (resource_id.to_owned(), thread_id.to_owned(), seqs.to_vec());
        self.blocking(move |inner| inner.messages_around(&resource_id, &thread_id, &seqs, before, after))
            .await
    }

    async fn search(&self, query: VectorQuery) -> Result<Vec<Hit>, StoreError> {
        self.blocking(move |inner| inner.search(&query)).await
    }

    async fn get_working_memory(
        &self,
        scope: &WorkingMemoryScope,
    ) -> Result<Option<WorkingMemoryRecord>, StoreError> {
        let scope = scope.clone();
        self.blocking(move |inner| inner.get_working_memory(&scope)).await
    }

    async fn put_working_memory(
        &self,
        scope: &WorkingMemoryScope,
        content: String,
        expected_version: u64,
    ) -> Result<u64, StoreError> {
        let scope = scope.clone();
        self.durable_write(false, move |inner| inner.put_working_memory(&scope, &content, expected_version))
            .await
    }

    async fn usage(&self, resource_id: &str) -> Result<ResourceUsage, StoreError> {
        let resource_id = resource_id.to_owned();
        self.blocking(move |inner| inner.usage(&resource_id)).await
    }

    async fn usage_with_thread(
        &self,
        resource_id: &str,
        thread_id: &str,
    ) -> Result<(ResourceUsage, bool), StoreError> {
        let (resource_id, thread_id) = (resource_id.to_owned(), thread_id.to_owned());
        self.blocking(move |inner| {
            let exists =
                inner.saves.threads.contains_key(keys::thread(&resource_id, &thread_id)).map_err(engine)?;
            Ok((inner.usage(&resource_id)?, exists))
        })
        .await
    }

    fn size_bytes(&self) -> Option<u64> {
        self.size_on_disk().ok()
    }

    fn free_bytes(&self) -> Option<u64> {
        Some(self.engine.free_bytes())
    }

    fn writability(&self) -> Option<tokio::sync::watch::Receiver<Writability>> {
        Some(self.engine.writability())
    }

    async fn cache_get(&self, scope: &CacheScope, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let (scope, key) = (scope.clone(), key.to_owned());
        self.blocking(move |inner| inner.cache_get(&scope, &key)).await
    }

    async fn cache_put(
        &self,
        scope: &CacheScope,
        key: &str,
        value: Vec<u8>,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        self.engine.check_space()?;
        let (scope, key) = (scope.clone(), key.to_owned());
        self.blocking(move |inner| inner.cache_put(&scope, &key, &value, expires_at)).await
    }
}

/// A resource's stored vectors, read for the recall index: the `vectors` tree's pointers under
/// the resource (or one of its threads), each read from the vector file.
struct StoredVectors<'a> {
    inner: &'a Inner,
    resource_id: &'a str,
}

impl StoredVectors<'_> {
    /// Each vector under `prefix`, with its thread and seq, until `each` says stop.
    fn each(
        &self,
        prefix: Vec<u8>,
        mut each: impl FnMut(&str, u64, &[f32]) -> bool,
    ) -> Result<bool, StoreError> {
        self.inner.each_vector(prefix, |key, vector| {
            let (thread_id, seq) = parse_vector_key(key)?;
            Ok(each(&thread_id, seq, vector))
        })
    }
}

impl VectorSource for StoredVectors<'_> {
    fn load(
        &self,
        vectors: &mut ResourceVectors,
        writer: &mut ScratchWriter<'_>,
        budget: usize,
    ) -> Result<bool, StoreError> {
        // A second pass only when the scratch file failed under the first, whose deferred codes
        // it held: the second has no scratch file to defer to.
        loop {
            let read_all = self.each(keys::vectors_prefix(self.resource_id), |thread_id, seq, vector| {
                vectors.load(thread_id, seq, vector, writer);
                !(vectors.len().is_multiple_of(1024) && vectors.memory_bytes() > budget)
            })?;
            if !read_all {
                return Ok(false);
            }
            if vectors.finish_load(writer) {
                return Ok(vectors.memory_bytes() <= budget);
            }
            vectors.release(writer.scratch());
            *vectors = ResourceVectors::default();
        }
    }

    fn load_thread(
        &self,
        thread_id: &str,
        vectors: &mut ResourceVectors,
        writer: &mut ScratchWriter<'_>,
    ) -> Result<(), StoreError> {
        self.each(keys::thread_vectors_prefix(self.resource_id, thread_id), |thread_id, seq, vector| {
            vectors.insert(thread_id, seq, vector, writer);
            true
        })
        .map(drop)
    }
}
