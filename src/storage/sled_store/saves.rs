//! Saving runs: every save queued while the last batch was written goes into one sled
//! transaction.
//!
//! A sled transaction writes its log buffer out twice before it commits (sled seals the buffer
//! around the batch's manifest), each write waited for on a sled thread; at 32 concurrent runs
//! that was two disk writes a run and a quarter of the server's CPU. The committing thread
//! ([`super::group_commit`]) hands [`Saves::commit`] every save queued since its last flush, and
//! they share one transaction. Each save is applied as before, seeing the ones before it in
//! the batch (two saves to one thread take consecutive seqs, one resource's usage adds up); a
//! save its checks refuse (a quota, a stale working-memory version, a corrupt record) is taken
//! out and the rest committed without it, so a batch commits exactly what the saves alone would.

use std::collections::HashMap;
use std::sync::Arc;

use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError, TransactionalTree};

use super::{abort, encode, engine, next_working_memory, read_thread, read_usage};
use crate::domain::now_millis;
use crate::storage::vector_file::{POINTER_BYTES, VectorFile};
use crate::storage::vector_index::SharedIndex;
use crate::storage::{ResourceUsage, RunSave, StoreError, Thread, check_quota, keys};

/// Where a save's vectors went in the vector file, one pointer per embedding.
pub(super) type Pointers = Vec<[u8; POINTER_BYTES]>;

/// A save waiting for its batch: the run's writes and where its vectors already are.
#[derive(Debug)]
pub(super) struct PendingSave {
    pub(super) save: RunSave,
    pub(super) pointers: Pointers,
}

/// What the committing thread needs to save runs: the trees a save writes, the vector file
/// its pointers point into and the recall index kept in step.
#[derive(Debug)]
pub(super) struct Saves {
    pub(super) threads: sled::Tree,
    pub(super) resource_threads: sled::Tree,
    pub(super) messages: sled::Tree,
    pub(super) message_ids: sled::Tree,
    pub(super) vectors: sled::Tree,
    pub(super) working_memory: sled::Tree,
    pub(super) usage: sled::Tree,
    pub(super) vector_file: Arc<VectorFile>,
    pub(super) index: Arc<SharedIndex>,
}

/// One save's writes, as its transaction made them: the vectors written (seq, vector) and
/// which of its pointers a key now names.
struct Applied {
    written: Vec<(u64, Vec<f32>)>,
    kept: Vec<bool>,
}

/// Every tree a thread's data spans ([`Saves::trees`]).
pub(super) type ThreadTrees<'a> = (
    &'a sled::Tree,
    &'a sled::Tree,
    &'a sled::Tree,
    &'a sled::Tree,
    &'a sled::Tree,
    &'a sled::Tree,
    &'a sled::Tree,
);

/// Why a batch's transaction did not commit.
enum Refused {
    /// The save at this place in the batch failed its checks.
    Save(usize, StoreError),
    /// sled failed: the whole batch.
    Engine(StoreError),
}

/// The most saves one transaction takes. A refused save makes its transaction run again
/// without it, so a bound keeps a batch full of refusals (a tenant far over its quota) from
/// costing the square of the queue.
const MOST_PER_TRANSACTION: usize = 64;

impl Saves {
    /// Commits `batch` in as few transactions as [`MOST_PER_TRANSACTION`] allows and keeps the
    /// recall index in step: one outcome per save, in order. A refused save's vector slots are
    /// given back; the others' are kept as their keys name them.
    pub(super) fn commit(&self, batch: &[PendingSave]) -> Vec<Result<(), StoreError>> {
        batch.chunks(MOST_PER_TRANSACTION).flat_map(|saves| self.commit_together(saves)).collect()
    }

    /// Commits `batch` in one transaction, less the saves its checks refuse.
    fn commit_together(&self, batch: &[PendingSave]) -> Vec<Result<(), StoreError>> {
        let mut outcomes: Vec<Option<Result<(), StoreError>>> = (0..batch.len()).map(|_| None).collect();
        let mut remaining: Vec<usize> = (0..batch.len()).collect();
        while !remaining.is_empty() {
            match self.transaction(batch, &remaining) {
                Ok(applied) => {
                    for (&at, applied) in remaining.iter().zip(applied) {
                        let PendingSave { save, pointers } = &batch[at];
                        self.release(pointers, &applied.kept);
                        if !applied.written.is_empty() {
                            self.index.lock().written(&save.resource_id, &save.thread_id, &applied.written);
                        }
                        outcomes[at] = Some(Ok(()));
                    }
                    break;
                }
                Err(Refused::Save(place, error)) => {
                    let at = remaining.remove(place);
                    self.release(&batch[at].pointers, &[]);
                    outcomes[at] = Some(Err(error));
                }
                Err(Refused::Engine(error)) => {
                    for at in remaining.drain(..) {
                        self.release(&batch[at].pointers, &[]);
                        outcomes[at] = Some(Err(error.clone()));
                    }
                }
            }
        }
        outcomes.into_iter().map(|outcome| outcome.expect("every save answered")).collect()
    }

    /// Every tree a thread's data spans, for transactions over all of it: threads,
    /// resource_threads, messages, message_ids, vectors, working_memory, usage.
    pub(super) fn trees(&self) -> ThreadTrees<'_> {
        (
            &self.threads,
            &self.resource_threads,
            &self.messages,
            &self.message_ids,
            &self.vectors,
            &self.working_memory,
            &self.usage,
        )
    }

    /// The saves of `batch` at `places`, in one transaction.
    fn transaction(&self, batch: &[PendingSave], places: &[usize]) -> Result<Vec<Applied>, Refused> {
        let outcome = self.trees().transaction(|trees| {
            let mut applied = Vec::with_capacity(places.len());
            for (place, &at) in places.iter().enumerate() {
                let PendingSave { save, pointers } = &batch[at];
                applied.push(apply(trees, save, pointers).map_err(|error| match error {
                    ConflictableTransactionError::Abort(error) => {
                        ConflictableTransactionError::Abort((place, error))
                    }
                    ConflictableTransactionError::Conflict => ConflictableTransactionError::Conflict,
                    ConflictableTransactionError::Storage(error) => {
                        ConflictableTransactionError::Storage(error)
                    }
                })?);
            }
            Ok(applied)
        });
        outcome.map_err(|error| match error {
            TransactionError::Abort((place, error)) => Refused::Save(place, error),
            TransactionError::Storage(error) => Refused::Engine(engine(error)),
        })
    }

    /// Gives back the slots of `pointers` not `kept` (`kept[i]` false, or missing).
    fn release(&self, pointers: &[[u8; POINTER_BYTES]], kept: &[bool]) {
        release_slots(&self.vector_file, pointers, kept);
    }
}

/// Gives back the slots of `pointers` a save wrote but did not keep (`kept[i]` false, or
/// missing: no pointer to them was committed).
pub(super) fn release_slots(vector_file: &VectorFile, pointers: &[[u8; POINTER_BYTES]], kept: &[bool]) {
    let unkept = pointers.iter().enumerate().filter(|(i, _)| !kept.get(*i).copied().unwrap_or(false));
    vector_file.release(&unkept.map(|(_, pointer)| VectorFile::slot_of(pointer)).collect::<Vec<_>>());
}

type SaveTrees = (
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
);

/// One save's writes inside a transaction: the thread (created if missing), each message not
/// saved before (saving is idempotent), the vectors of those, the working memory, the
/// resource's usage, checked against its quota.
fn apply(
    (threads, resource_threads, messages, message_ids, vectors, working_memory, usage): &SaveTrees,
    save: &RunSave,
    pointers: &[[u8; POINTER_BYTES]],
) -> Result<Applied, ConflictableTransactionError<StoreError>> {
    let now = now_millis();
    let usage_key = keys::resource_usage(&save.resource_id);
    let before = read_usage(usage, &usage_key)?;
    let mut added = ResourceUsage::default();
    let mut thread = match read_thread(threads, &save.resource_id, &save.thread_id)? {
        Some(thread) => thread,
        None => {
            added.threads += 1;
            resource_threads.insert(keys::resource_thread(&save.resource_id, now, &save.thread_id), &[])?;
            Thread {
                id: save.thread_id.clone(),
                resource_id: save.resource_id.clone(),
                title: String::new(),
                metadata: Default::default(),
                created_at: now,
                updated_at: now,
                next_seq: 0,
            }
        }
    };
    let mut seqs: HashMap<&str, u64> = HashMap::new();
    for message in &save.messages {
        let id_key = keys::message_id(&save.resource_id, &message.id);
        if message_ids.get(&id_key)?.is_some() {
            continue; // saved before: saving is idempotent
        }
        let seq = thread.next_seq;
        let message_key = keys::message(&save.resource_id, &save.thread_id, seq);
        let mut stored = message.clone();
        stored.thread_id.clone_from(&save.thread_id);
        stored.resource_id.clone_from(&save.resource_id);
        let record = encode(&stored);
        added.messages += 1;
        added.bytes += record.len() as u64;
        messages.insert(message_key.as_slice(), record)?;
        message_ids.insert(id_key, message_key)?;
        seqs.insert(&message.id, seq);
        thread.next_seq += 1;
    }
    let mut written = Vec::new();
    let mut kept = vec![false; pointers.len()];
    for ((embedding, pointer), kept) in save.embeddings.iter().zip(pointers).zip(&mut kept) {
        if let Some(&seq) = seqs.get(embedding.message_id.as_str()) {
            *kept = true;
            let key = keys::vector(&save.resource_id, &save.thread_id, seq);
            added.bytes += embedding.vector.len() as u64 * 4;
            vectors.insert(key, pointer.as_slice())?;
            written.push((seq, embedding.vector.clone()));
        }
    }
    if let Some((scope, content, expected_version)) = &save.working_memory {
        let record = next_working_memory(working_memory, scope, content, *expected_version)?;
        working_memory.insert(keys::working_memory(scope), encode(&record))?;
    }
    let after = before.plus(added);
    if let Err(error) = check_quota(&save.quota, &save.resource_id, before, after) {
        return abort(error);
    }
    if after != before {
        usage.insert(usage_key, &after.encode())?;
    }
    thread.updated_at = now;
    threads.insert(keys::thread(&save.resource_id, &save.thread_id), encode(&thread))?;
    Ok(Applied { written, kept })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Message, Part, ResourceQuota, Role};
    use crate::storage::EmbeddingRecord;
    use crate::storage::vector_index::DEFAULT_INDEX_BYTES;

    fn saves(directory: &std::path::Path) -> Saves {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let tree = |name: &str| db.open_tree(name).unwrap();
        Saves {
            threads: tree("threads"),
            resource_threads: tree("resource_threads"),
            messages: tree("messages"),
            message_ids: tree("resource_message_ids"),
            vectors: tree("vectors"),
            working_memory: tree("working_memory"),
            usage: tree("resource_usage"),
            vector_file: Arc::new(VectorFile::open(directory, Some(2)).unwrap()),
            index: Arc::new(SharedIndex::new(DEFAULT_INDEX_BYTES, None)),
        }
    }

    /// A save of `count` messages to thread `t` of resource `r`, each with a vector already in
    /// the file, under a quota of two messages.
    fn pending(saves: &Saves, count: usize) -> PendingSave {
        let messages: Vec<Message> =
            (0..count).map(|i| Message::new(Role::User, vec![Part::text(format!("m{i}"))])).collect();
        let embeddings: Vec<EmbeddingRecord> = messages
            .iter()
            .map(|message| EmbeddingRecord {
                message_id: message.id.clone(),
                embedder: "test".into(),
                vector: vec![0.6, 0.8],
            })
            .collect();
        let pointers = embeddings.iter().map(|e| saves.vector_file.write(&e.vector).unwrap()).collect();
        let save = RunSave {
            thread_id: "t".into(),
            resource_id: "r".into(),
            messages,
            embeddings,
            working_memory: None,
            quota: ResourceQuota { messages: Some(2), ..Default::default() },
        };
        PendingSave { save, pointers }
    }

    /// In one batch, a save its quota refuses is taken out and the rest commit as they would
    /// alone: the saves around it append to one thread with consecutive seqs, the usage counts
    /// them, and the refused save leaves no message, vector or slot behind.
    #[test]
    fn a_refused_save_in_a_batch_leaves_the_others_committed() {
        let directory = tempfile::tempdir().unwrap();
        let saves = saves(directory.path());
        let batch = [pending(&saves, 1), pending(&saves, 3), pending(&saves, 1)];
        let outcomes = saves.commit(&batch);
        assert!(outcomes[0].is_ok() && outcomes[2].is_ok(), "{outcomes:?}");
        assert!(matches!(outcomes[1], Err(StoreError::QuotaExceeded { .. })), "{outcomes:?}");

        let seq_of = |save: &PendingSave| {
            let key = saves.message_ids.get(keys::message_id("r", &save.save.messages[0].id)).unwrap();
            keys::seq_of_message_key(&key.expect("the saved message has an id entry"))
        };
        let seqs = [seq_of(&batch[0]), seq_of(&batch[2])];
        assert_eq!(seqs, [0, 1]);
        assert_eq!((saves.messages.len(), saves.message_ids.len(), saves.vectors.len()), (2, 2, 2));
        let usage = ResourceUsage::decode(&saves.usage.get(keys::resource_usage("r")).unwrap().unwrap());
        assert_eq!((usage.threads, usage.messages), (1, 2));
        let mut refused: Vec<u64> = batch[1].pointers.iter().map(VectorFile::slot_of).collect();
        let mut reused: Vec<u64> =
            (0..3).map(|_| VectorFile::slot_of(&saves.vector_file.write(&[0.6, 0.8]).unwrap())).collect();
        refused.sort_unstable();
        reused.sort_unstable();
        assert_eq!(reused, refused, "the refused save's slots are free again");
    }
}
