//! The `Store` contract, run against every backend: sled, and PostgreSQL on a fresh database
//! of the test server (`common::postgres`). What only one backend has (sled's format and lock,
//! its in-memory recall budget; PostgreSQL's schema versions) is tested on that one.

use agentwire::domain::{
    FinishReason, HookCallRecord, HookDecision, IdPatterns, Message, Part, ResourceAllowance, Role,
    RunOutcome, RunRecord, TimelineEntry,
};
use agentwire::storage::{
    CacheScope, Direction, EmbeddingRecord, NewThread, RecallScope, RunFilter, RunPage, RunSave, SledStore,
    Store, StoreError, ThreadUpdate, VectorQuery, WorkingMemoryScope,
};

use std::sync::Arc;

use crate::common::postgres;

fn open() -> (tempfile::TempDir, SledStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    (dir, store)
}

/// One backend's store, empty, and what keeps it alive.
struct Backend {
    name: &'static str,
    store: Arc<dyn Store>,
    _dir: Option<tempfile::TempDir>,
}

/// An empty store of every backend there is here (PostgreSQL when the tests have one).
async fn backends() -> Vec<Backend> {
    let (dir, sled) = open();
    let mut backends = vec![Backend { name: "sled", store: Arc::new(sled), _dir: Some(dir) }];
    if let Some((_, store)) = postgres::fresh_store().await {
        backends.push(Backend { name: "postgres", store: Arc::new(store), _dir: None });
    }
    backends
}

fn message(text: &str) -> Message {
    Message::new(Role::User, vec![Part::text(text)])
}

fn save(thread: &str, resource: &str, messages: Vec<Message>) -> RunSave {
    RunSave {
        thread_id: thread.into(),
        resource_id: resource.into(),
        messages,
        embeddings: Vec::new(),
        working_memory: None,
        quota: Default::default(),
    }
}

fn texts(messages: &[agentwire::storage::StoredMessage]) -> Vec<String> {
    messages.iter().map(|stored| stored.message.text()).collect()
}

/// A run's save creates the thread, appends in order, and is idempotent per message id.
#[tokio::test]
async fn save_run_appends_in_order_and_is_idempotent() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let store: &dyn Store = &*backend.store;
        let first = message("one");
        store.save_run(save("t", "r", vec![first.clone(), message("two")])).await.unwrap();
        store.save_run(save("t", "r", vec![first, message("three")])).await.unwrap();
        let thread = store.get_thread("r", "t").await.unwrap().expect("created");
        assert_eq!(thread.resource_id, "r");
        assert_eq!(thread.next_seq, 3);
        let all = store.last_messages("r", "t", 10).await.unwrap();
        assert_eq!(texts(&all), ["one", "two", "three"]);
        assert_eq!(all.iter().map(|stored| stored.seq).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(
            all.iter().all(|stored| stored.message.thread_id == "t" && stored.message.resource_id == "r")
        );
        assert_eq!(texts(&store.last_messages("r", "t", 2).await.unwrap()), ["two", "three"]);
    }
}

/// Message ids are scoped by resource: an id one resource used neither hides another
/// resource's message with the same id nor is it seen there; within a resource it still makes
/// saving idempotent.
#[tokio::test]
async fn message_ids_are_scoped_by_resource() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let store: &dyn Store = &*backend.store;
        let mut alice = message("alice's");
        alice.id = "m-1".into();
        let mut bob = message("bob's");
        bob.id = "m-1".into();
        store.save_run(save("alice-thread", "alice", vec![alice.clone()])).await.unwrap();
        store.save_run(save("bob-thread", "bob", vec![bob])).await.unwrap();
        assert_eq!(texts(&store.last_messages("bob", "bob-thread", 10).await.unwrap()), ["bob's"]);
        store.save_run(save("alice-thread", "alice", vec![alice])).await.unwrap();
        assert_eq!(texts(&store.last_messages("alice", "alice-thread", 10).await.unwrap()), ["alice's"]);
        // Deleting one resource's thread frees only its own ids.
        store.delete_thread("bob", "bob-thread").await.unwrap();
        let mut again = message("alice's again");
        again.id = "m-1".into();
        store.save_run(save("alice-thread", "alice", vec![again])).await.unwrap();
        assert_eq!(texts(&store.last_messages("alice", "alice-thread", 10).await.unwrap()), ["alice's"]);
    }
}

/// Thread ids are a resource's own: another resource's thread of the same id is another thread,
/// and neither sees the other's messages.
#[tokio::test]
async fn thread_ids_are_scoped_by_resource() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let store: &dyn Store = &*backend.store;
        store.save_run(save("t", "alice", vec![message("alice's")])).await.unwrap();
        store.save_run(save("t", "mallory", vec![message("mallory's")])).await.unwrap();
        assert_eq!(texts(&store.last_messages("alice", "t", 10).await.unwrap()), ["alice's"]);
        assert_eq!(texts(&store.last_messages("mallory", "t", 10).await.unwrap()), ["mallory's"]);
        assert_eq!(store.get_thread("alice", "t").await.unwrap().unwrap().resource_id, "alice");
        store.delete_thread("mallory", "t").await.unwrap();
        assert_eq!(texts(&store.last_messages("alice", "t", 10).await.unwrap()), ["alice's"]);
        assert!(store.get_thread("mallory", "t").await.unwrap().is_none());
    }
}

/// Threads list newest first, in pages; messages page both ways; neighbours come deduplicated.
#[tokio::test]
async fn paging_and_neighbours() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let store: &dyn Store = &*backend.store;
        for index in 0..5 {
            let thread = store
                .create_thread(NewThread {
                    id: format!("t{index}"),
                    resource_id: "r".into(),
                    ..Default::default()
                })
                .await
                .unwrap();
            assert_eq!(thread.id, format!("t{index}"));
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        let duplicate = NewThread { id: "t0".into(), resource_id: "r".into(), ..Default::default() };
        assert_eq!(store.create_thread(duplicate).await.unwrap_err(), StoreError::ThreadExists("t0".into()));
        let first = store.list_threads("r", "", 2).await.unwrap();
        assert_eq!(first.threads.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["t4", "t3"]);
        let second = store.list_threads("r", &first.next_cursor, 2).await.unwrap();
        assert_eq!(second.threads.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["t2", "t1"]);
        let last = store.list_threads("r", &second.next_cursor, 2).await.unwrap();
        assert_eq!(last.threads.len(), 1);
        assert!(last.next_cursor.is_empty());
        assert!(store.list_threads("other", "", 10).await.unwrap().threads.is_empty());

        let messages = (0..7).map(|index| message(&format!("m{index}"))).collect();
        store.save_run(save("t0", "r", messages)).await.unwrap();
        let forward = store.list_messages("r", "t0", Direction::Forward, "", 3).await.unwrap();
        assert_eq!(texts(&forward.messages), ["m0", "m1", "m2"]);
        let forward_next =
            store.list_messages("r", "t0", Direction::Forward, &forward.next_cursor, 3).await.unwrap();
        assert_eq!(texts(&forward_next.messages), ["m3", "m4", "m5"]);
        let backward = store.list_messages("r", "t0", Direction::Backward, "", 4).await.unwrap();
        assert_eq!(texts(&backward.messages), ["m6", "m5", "m4", "m3"]);
        let backward_next =
            store.list_messages("r", "t0", Direction::Backward, &backward.next_cursor, 4).await.unwrap();
        assert_eq!(texts(&backward_next.messages), ["m2", "m1", "m0"]);
        assert!(backward_next.next_cursor.is_empty());

        let around = store.messages_around("r", "t0", &[1, 2, 6], 1, 1).await.unwrap();
        assert_eq!(texts(&around), ["m0", "m1", "m2", "m3", "m5", "m6"]);
    }
}

fn unit(values: &[f32]) -> Vec<f32> {
    let norm = values.iter().map(|v| v * v).sum::<f32>().sqrt();
    values.iter().map(|v| v / norm).collect()
}

fn embedded(thread: &str, resource: &str, text: &str, vector: &[f32]) -> RunSave {
    let message = message(text);
    let embedding =
        EmbeddingRecord { message_id: message.id.clone(), embedder: "test".into(), vector: unit(vector) };
    RunSave { embeddings: vec![embedding], ..save(thread, resource, vec![message]) }
}

/// Search stays inside its scope, ranks by similarity, honours the threshold, and refuses
/// vectors of another embedder.
#[tokio::test]
async fn search_is_scoped_ranked_and_checked() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let store: &dyn Store = &*backend.store;
        store.save_run(embedded("a1", "alice", "cats", &[1.0, 0.0, 0.0])).await.unwrap();
        store.save_run(embedded("a2", "alice", "kittens", &[0.9, 0.1, 0.0])).await.unwrap();
        store.save_run(embedded("b1", "bob", "cats too", &[1.0, 0.0, 0.0])).await.unwrap();
        let query = |scope: RecallScope| VectorQuery {
            scope,
            embedder: "test".into(),
            vector: unit(&[1.0, 0.0, 0.0]),
            top_k: 10,
            threshold: None,
        };
        let alice = store.search(query(RecallScope::Resource("alice".into()))).await.unwrap();
        assert_eq!(alice.iter().map(|hit| hit.thread_id.as_str()).collect::<Vec<_>>(), ["a1", "a2"]);
        assert!(alice[0].score > alice[1].score);
        let thread_only = store
            .search(query(RecallScope::Thread { resource_id: "alice".into(), thread_id: "a2".into() }))
            .await
            .unwrap();
        assert_eq!(thread_only.len(), 1);
        let mut strict = query(RecallScope::Resource("alice".into()));
        strict.threshold = Some(0.999);
        assert_eq!(store.search(strict).await.unwrap().len(), 1);
        // Written after the resource was loaded into memory: still found.
        store.save_run(embedded("a3", "alice", "more cats", &[1.0, 0.0, 0.01])).await.unwrap();
        assert_eq!(store.search(query(RecallScope::Resource("alice".into()))).await.unwrap().len(), 3);

        let mut foreign = query(RecallScope::Resource("alice".into()));
        foreign.embedder = "other".into();
        assert!(matches!(store.search(foreign).await, Err(StoreError::EmbedderMismatch { .. })));
        let wrong_writer = RunSave {
            embeddings: vec![EmbeddingRecord {
                message_id: "x".into(),
                embedder: "other".into(),
                vector: vec![1.0],
            }],
            ..save("a1", "alice", vec![])
        };
        assert!(matches!(store.save_run(wrong_writer).await, Err(StoreError::EmbedderMismatch { .. })));
    }
}

/// Working memory is versioned: a write based on a stale version is refused.
#[tokio::test]
async fn working_memory_writes_are_versioned() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let store: &dyn Store = &*backend.store;
        let scope = WorkingMemoryScope::Resource("r".into());
        assert!(store.get_working_memory(&scope).await.unwrap().is_none());
        assert_eq!(store.put_working_memory(&scope, "# v1".into(), 0).await.unwrap(), 1);
        assert_eq!(store.put_working_memory(&scope, "# v2".into(), 1).await.unwrap(), 2);
        let stale = store.put_working_memory(&scope, "# lost?".into(), 1).await.unwrap_err();
        assert!(matches!(stale, StoreError::VersionConflict { expected: 1, found: 2, .. }));
        assert_eq!(store.get_working_memory(&scope).await.unwrap().unwrap().content, "# v2");
    }
}

/// Deleting a thread takes its messages, embeddings and working memory; deleting a resource takes
/// all of its threads and reports the counts.
#[tokio::test]
async fn deletes_cascade_and_report_counts() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let store: &dyn Store = &*backend.store;
        store.save_run(embedded("a1", "alice", "one", &[1.0, 0.0])).await.unwrap();
        store.save_run(embedded("a2", "alice", "two", &[0.0, 1.0])).await.unwrap();
        store.save_run(save("a2", "alice", vec![message("three")])).await.unwrap();
        store.save_run(embedded("b1", "bob", "bob's", &[1.0, 0.0])).await.unwrap();
        store
            .put_working_memory(
                &WorkingMemoryScope::Thread { resource_id: "alice".into(), thread_id: "a1".into() },
                "notes".into(),
                0,
            )
            .await
            .unwrap();
        store
            .put_working_memory(&WorkingMemoryScope::Resource("alice".into()), "profile".into(), 0)
            .await
            .unwrap();

        let report = store.delete_thread("alice", "a1").await.unwrap();
        assert_eq!(
            (report.threads, report.messages, report.embeddings, report.working_memories),
            (1, 1, 1, 1)
        );
        assert!(store.get_thread("alice", "a1").await.unwrap().is_none());
        assert!(store.last_messages("alice", "a1", 10).await.unwrap().is_empty());
        assert_eq!(
            store.delete_thread("alice", "a1").await.unwrap_err(),
            StoreError::ThreadNotFound("a1".into())
        );

        let report = store.delete_resource("alice").await.unwrap();
        assert_eq!(
            (report.threads, report.messages, report.embeddings, report.working_memories),
            (1, 2, 1, 1)
        );
        assert!(store.list_threads("alice", "", 10).await.unwrap().threads.is_empty());
        let query = VectorQuery {
            scope: RecallScope::Resource("alice".into()),
            embedder: "test".into(),
            vector: unit(&[1.0, 0.0]),
            top_k: 5,
            threshold: None,
        };
        assert!(store.search(query).await.unwrap().is_empty());
        assert_eq!(store.last_messages("bob", "b1", 10).await.unwrap().len(), 1, "bob is untouched");
    }
}

/// Everything survives closing and reopening the store; renames and metadata too.
#[tokio::test]
async fn data_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SledStore::open(dir.path()).unwrap();
        store.save_run(embedded("t", "r", "remember me", &[1.0, 0.0])).await.unwrap();
        let metadata = serde_json::json!({ "topic": "memory" }).as_object().unwrap().clone();
        let update = ThreadUpdate { title: Some("Kept".into()), metadata: Some(metadata) };
        store.update_thread("r", "t", update).await.unwrap();
    }
    let store = SledStore::open(dir.path()).unwrap();
    let thread = store.get_thread("r", "t").await.unwrap().unwrap();
    assert_eq!(thread.title, "Kept");
    assert_eq!(thread.metadata["topic"], "memory");
    assert_eq!(texts(&store.last_messages("r", "t", 10).await.unwrap()), ["remember me"]);
    let query = VectorQuery {
        scope: RecallScope::Thread { resource_id: "r".into(), thread_id: "t".into() },
        embedder: "test".into(),
        vector: unit(&[1.0, 0.0]),
        top_k: 1,
        threshold: None,
    };
    assert_eq!(store.search(query).await.unwrap().len(), 1);
}

/// Ids of the threads a resource-wide search finds, best first.
async fn found_threads(store: &SledStore, resource: &str, vector: &[f32]) -> Vec<String> {
    let query = VectorQuery {
        scope: RecallScope::Resource(resource.into()),
        embedder: "test".into(),
        vector: unit(vector),
        top_k: 10,
        threshold: None,
    };
    store.search(query).await.unwrap().into_iter().map(|hit| hit.thread_id).collect()
}

/// The bytes of the store's vector file.
fn vector_file_bytes(dir: &std::path::Path) -> u64 {
    std::fs::metadata(dir.join("vectors.f32")).map_or(0, |metadata| metadata.len())
}

/// Vectors live in the vector file, one slot each, and the tree only points to them; a deleted
/// thread's slots are written again by the next saves (the file does not grow), its vectors are
/// not found, and what took their slots is found, after a reopen too.
#[tokio::test]
async fn sled_vectors_live_in_their_file_and_deleted_slots_are_reused() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    for i in 0..4 {
        store
            .save_run(embedded("old", "r", &format!("old {i}"), &[1.0, 0.0, i as f32 / 10.0]))
            .await
            .unwrap();
    }
    assert_eq!(vector_file_bytes(dir.path()), 4 * 3 * 4, "four slots of three f32s");
    assert_eq!(store.usage("r").await.unwrap().messages, 4);
    store.delete_thread("r", "old").await.unwrap();
    for i in 0..4 {
        store
            .save_run(embedded("new", "r", &format!("new {i}"), &[0.0, 1.0, i as f32 / 10.0]))
            .await
            .unwrap();
    }
    assert_eq!(vector_file_bytes(dir.path()), 4 * 3 * 4, "the deleted slots were written again");
    assert_eq!(found_threads(&store, "r", &[0.0, 1.0, 0.0]).await, ["new"; 4]);
    drop(store);

    let store = SledStore::open(dir.path()).unwrap();
    assert_eq!(found_threads(&store, "r", &[1.0, 0.0, 0.0]).await, ["new"; 4], "only the new vectors");
    let usage = store.usage("r").await.unwrap();
    assert_eq!(usage.messages, 4);
    store.save_run(embedded("more", "r", "appended", &[1.0, 0.0, 0.0])).await.unwrap();
    assert_eq!(vector_file_bytes(dir.path()), 5 * 3 * 4);
    assert_eq!(found_threads(&store, "r", &[1.0, 0.0, 0.0]).await[0], "more");
}

/// The store's sled database opened raw, once the store that had it open has let go of its
/// lock (sled's threads hold it a moment after the store is dropped).
fn raw_sled(dir: &std::path::Path) -> sled::Db {
    let started = std::time::Instant::now();
    loop {
        match sled::open(dir) {
            Err(sled::Error::Io(error))
                if error.to_string().contains("could not acquire lock")
                    && started.elapsed() < std::time::Duration::from_secs(10) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            opened => return opened.unwrap(),
        }
    }
}

/// The values of sled's `run_pages` tree, by key.
fn run_page_values(dir: &std::path::Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let raw = raw_sled(dir);
    let pages = raw.open_tree("run_pages").unwrap();
    pages.iter().map(|entry| entry.map(|(key, value)| (key.to_vec(), value.to_vec())).unwrap()).collect()
}

/// The segment files of a store's run records.
fn run_segment_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("runs"))
        .map(|entries| {
            entries.map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned()).collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Run records' pages live in segment files and sled keeps only a 17-byte pointer to each (sled
/// never pages out a value of over 128 KiB, so pages in its tree stayed in memory), a record of
/// 200 KB included; a store that kept its pages inline reads them the same, retention writes
/// what it keeps into segments, and `compact` moves the rest; a segment no page points into is
/// deleted.
#[tokio::test]
async fn sled_run_records_live_in_segment_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut records: Vec<RunRecord> = (0..300)
        .map(|index| {
            run_record(&format!("r{index:03}"), index + 1, "echo", "x", RunOutcome::Finished, "probe")
        })
        .collect();
    records[150].content = Some(agentwire::domain::RunContent {
        prompts: Vec::new(),
        chunks: vec![agentwire::domain::Chunk::TextDelta { id: "t".into(), text: "word ".repeat(40_000) }],
        truncated: false,
    });
    {
        let store = SledStore::open(dir.path()).unwrap();
        store.save_run_records(records[..100].to_vec()).await.unwrap();
        store.save_run_records(records[100..].to_vec()).await.unwrap();
    }
    let values = run_page_values(dir.path());
    assert_eq!(values.len(), 2, "a page per batch");
    assert!(values.iter().all(|(_, value)| value.len() == 17), "sled keeps pointers only");
    assert_eq!(run_segment_files(dir.path()), ["00000000.seg"]);

    // As a store written before segments kept them: each page inline, under its number.
    {
        let store = SledStore::open(dir.path()).unwrap();
        assert_eq!(
            store.get_run_record("r150").await.unwrap().as_ref(),
            Some(&records[150]),
            "the large one"
        );
        drop(store);
        let pages: Vec<Vec<u8>> = {
            let segment = std::fs::read(dir.path().join("runs/00000000.seg")).unwrap();
            let lengths: Vec<usize> = values
                .iter()
                .map(|(_, pointer)| u32::from_le_bytes(pointer[9..13].try_into().unwrap()) as usize)
                .collect();
            vec![segment[..lengths[0]].to_vec(), segment[lengths[0]..lengths[0] + lengths[1]].to_vec()]
        };
        let raw = raw_sled(dir.path());
        let tree = raw.open_tree("run_pages").unwrap();
        for ((key, _), page) in values.iter().zip(pages) {
            tree.insert(key, page).unwrap();
        }
        raw.flush().unwrap();
        std::fs::remove_dir_all(dir.path().join("runs")).unwrap();
    }
    let store = SledStore::open(dir.path()).unwrap();
    let listed = store.list_run_records(&RunFilter::default(), "", 300).await.unwrap();
    assert!(listed.runs.iter().rev().eq(records.iter()), "every record, newest first");
    assert_eq!(store.prune_run_records(None, Some(250)).await.unwrap(), 50, "the first page loses 50");
    drop(store);
    let lengths: Vec<usize> = run_page_values(dir.path()).iter().map(|(_, value)| value.len()).collect();
    assert_eq!(
        lengths.iter().filter(|length| **length == 17).count(),
        1,
        "the page retention kept is a pointer"
    );
    agentwire::storage::compact(dir.path()).unwrap();
    assert!(
        run_page_values(dir.path()).iter().all(|(_, value)| value.len() == 17),
        "compaction moved the rest"
    );
    let store = SledStore::open(dir.path()).unwrap();
    let kept = store.list_run_records(&RunFilter::default(), "", 300).await.unwrap().runs;
    assert!(kept.iter().rev().eq(records[50..].iter()), "the newest 250, after compaction");
    assert_eq!(store.get_run_record("r150").await.unwrap().as_ref(), Some(&records[150]));
    assert_eq!(store.prune_run_records(None, Some(0)).await.unwrap(), 250);
    store.save_run_records(vec![records[0].clone()]).await.unwrap();
    drop(store);
    assert_eq!(run_segment_files(dir.path()), ["00000001.seg"], "the emptied segment is deleted");
}

/// A format-2 store keeps its vectors inline in the tree: it opens as format 3 and finds them as
/// they are, new vectors go to the file beside them, and `compact` moves the inline ones into the
/// file, where they are found the same.
#[tokio::test]
async fn a_format_2_store_reads_its_inline_vectors_and_compaction_moves_them() {
    let dir = tempfile::tempdir().unwrap();
    let inline = [unit(&[1.0, 0.0]), unit(&[0.8, 0.2])];
    {
        let store = SledStore::open(dir.path()).unwrap();
        store.save_run(embedded("t1", "r", "first", &inline[0])).await.unwrap();
        store.save_run(embedded("t2", "r", "second", &inline[1])).await.unwrap();
    }
    {
        // Back to format 2: the vectors inline, no vector file.
        let raw = raw_sled(dir.path());
        let vectors = raw.open_tree("vectors").unwrap();
        let keys: Vec<_> = vectors.iter().keys().map(Result::unwrap).collect();
        for (key, vector) in keys.iter().zip(&inline) {
            let bytes: Vec<u8> = vector.iter().flat_map(|value| value.to_le_bytes()).collect();
            vectors.insert(key, bytes).unwrap();
        }
        raw.open_tree("meta").unwrap().insert("format_version", &2u32.to_be_bytes()).unwrap();
        raw.flush().unwrap();
        std::fs::remove_file(dir.path().join("vectors.f32")).unwrap();
    }
    {
        let store = SledStore::open(dir.path()).unwrap();
        assert_eq!(found_threads(&store, "r", &[1.0, 0.0]).await, ["t1", "t2"]);
        store.save_run(embedded("t3", "r", "third", &[0.0, 1.0])).await.unwrap();
        assert_eq!(vector_file_bytes(dir.path()), 2 * 4, "only the new vector is in the file");
        assert_eq!(found_threads(&store, "r", &[0.0, 1.0]).await, ["t3", "t2", "t1"]);
    }
    agentwire::storage::compact(dir.path()).unwrap();
    assert_eq!(vector_file_bytes(dir.path()), 3 * 2 * 4, "every vector is in the file");
    {
        let raw = raw_sled(dir.path());
        let format = raw.open_tree("meta").unwrap().get("format_version").unwrap().unwrap();
        assert_eq!(format.as_ref(), 3u32.to_be_bytes());
        let lengths: Vec<usize> =
            raw.open_tree("vectors").unwrap().iter().values().map(|value| value.unwrap().len()).collect();
        assert_eq!(lengths, [13, 13, 13], "pointers, not vectors");
    }
    let store = SledStore::open(dir.path()).unwrap();
    assert_eq!(found_threads(&store, "r", &[1.0, 0.0]).await, ["t1", "t2", "t3"]);
}

/// A data directory written in another storage format is refused at open, not misread.
#[tokio::test]
async fn an_unknown_storage_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(SledStore::open(dir.path()).unwrap());
    {
        let raw = raw_sled(dir.path());
        raw.open_tree("meta").unwrap().insert("format_version", &99u32.to_be_bytes()).unwrap();
        raw.flush().unwrap();
    }
    let error = SledStore::open(dir.path()).unwrap_err();
    assert_eq!(error, StoreError::UnsupportedFormat { found: 99, supported: 3 });
    assert!(error.to_string().contains("format 99"));
}

/// A second open of a directory in use waits for the lock, then fails clearly; it succeeds as
/// soon as the first store closes.
#[tokio::test]
async fn opening_waits_for_a_store_closing_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let first = SledStore::open(dir.path()).unwrap();
    let path = dir.path().to_owned();
    let second = std::thread::spawn(move || SledStore::open(&path).map(|_| ()));
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(first);
    assert_eq!(second.join().unwrap(), Ok(()), "opened once the first store closed");
}

/// Cached values are kept per scope, expire, and go with their thread or resource.
#[tokio::test]
async fn cached_values_expire_and_are_scoped() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let store: &dyn Store = &*backend.store;
        let now = agentwire::domain::now_millis();
        let alice = CacheScope::Resource("alice".into());
        let thread = CacheScope::Thread { resource_id: "alice".into(), thread_id: "t1".into() };
        store.cache_put(&alice, "k", b"answer".to_vec(), now + 60_000).await.unwrap();
        store.cache_put(&thread, "k", b"thread answer".to_vec(), now + 60_000).await.unwrap();
        store.cache_put(&alice, "old", b"stale".to_vec(), now - 1).await.unwrap();
        assert_eq!(store.cache_get(&alice, "k").await.unwrap().as_deref(), Some(&b"answer"[..]));
        assert_eq!(store.cache_get(&CacheScope::Resource("bob".into()), "k").await.unwrap(), None);
        assert_eq!(store.cache_get(&alice, "old").await.unwrap(), None, "expired");
        store.save_run(save("t1", "alice", vec![message("hi")])).await.unwrap();
        store.delete_thread("alice", "t1").await.unwrap();
        assert_eq!(store.cache_get(&thread, "k").await.unwrap(), None, "gone with its thread");
        store.delete_resource("alice").await.unwrap();
        assert_eq!(store.cache_get(&alice, "k").await.unwrap(), None, "gone with its resource");
    }
}

/// Recall's in-memory codes stay within their budget: searching many resources drops the least
/// recently searched ones, and a dropped resource searched again is read back from disk with the
/// same results; a resource too large for the budget is never loaded and is searched on disk,
/// exactly, new writes included.
#[tokio::test]
async fn recall_memory_stays_within_its_budget() {
    let (_dir, store) = open();
    let dimension = 64;
    for resource in 0..12 {
        let messages: Vec<Message> = (0..50).map(|index| message(&format!("r{resource} m{index}"))).collect();
        let embeddings = messages
            .iter()
            .enumerate()
            .map(|(index, message)| {
                let vector: Vec<f32> =
                    (0..dimension).map(|d| ((d * (index + 1) + resource) % 7) as f32 + 0.1).collect();
                EmbeddingRecord {
                    message_id: message.id.clone(),
                    embedder: "test".into(),
                    vector: unit(&vector),
                }
            })
            .collect();
        let thread = format!("t{resource}");
        let resource = format!("r{resource}");
        store.save_run(RunSave { embeddings, ..save(&thread, &resource, messages) }).await.unwrap();
    }
    let query = |resource: usize| VectorQuery {
        scope: RecallScope::Resource(format!("r{resource}")),
        embedder: "test".into(),
        vector: unit(&vec![1.0; dimension]),
        top_k: 3,
        threshold: None,
    };
    let first = store.search(query(0)).await.unwrap();
    let one_resource = store.recall_index_bytes();
    assert!(
        (50 * dimension / 2..50 * dimension * 4 / 2).contains(&one_resource),
        "{one_resource} bytes for 50 vectors of {dimension}: codes, half a byte a component, under half the f32s"
    );
    store.set_recall_budget(3 * one_resource);
    for resource in 0..12 {
        assert_eq!(store.search(query(resource)).await.unwrap().len(), 3);
        assert!(store.recall_index_bytes() <= 3 * one_resource, "{} bytes", store.recall_index_bytes());
    }
    let again = store.search(query(0)).await.unwrap();
    let ids = |hits: &[agentwire::storage::Hit]| {
        hits.iter().map(|hit| (hit.thread_id.clone(), hit.seq)).collect::<Vec<_>>()
    };
    assert_eq!(ids(&again), ids(&first), "read back from disk, the same hits");

    store.set_recall_budget(one_resource / 2);
    assert_eq!(store.recall_index_bytes(), 0, "a smaller budget drops what no longer fits");
    let on_disk = store.search(query(0)).await.unwrap();
    assert_eq!(ids(&on_disk), ids(&first), "searched on disk, the same hits");
    assert_eq!(store.recall_index_bytes(), 0, "a resource larger than the budget is not loaded");
    let closest = message("closest");
    let axis: Vec<f32> = (0..dimension).map(|d| if d == 0 { 1.0 } else { 0.0 }).collect();
    let embedding =
        EmbeddingRecord { message_id: closest.id.clone(), embedder: "test".into(), vector: axis.clone() };
    let saved = RunSave { embeddings: vec![embedding], ..save("t0", "r0", vec![closest]) };
    store.save_run(saved).await.unwrap();
    let hits = store.search(VectorQuery { vector: axis, ..query(0) }).await.unwrap();
    assert_eq!((hits[0].thread_id.as_str(), hits[0].seq), ("t0", 50), "{hits:?}");
    assert!((hits[0].score - 1.0).abs() < 1e-5, "an exact score: {}", hits[0].score);
}

/// A resource past the clustering threshold (20,000 vectors) is searched through its clusters
/// and rescored from the scratch file and the stored vectors: its hits are an exact scan's, with
/// exact scores, before and after one of its threads is deleted and a closer vector is written.
#[tokio::test]
async fn a_clustered_resource_finds_what_an_exact_scan_finds() {
    let (dir, store) = open();
    let (dimension, groups, per_thread, threads) = (64, 64, 3_000, 7);
    let mut state = 3u64;
    let mut noise = move || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let mut corpus: Vec<(String, u64, Vec<f32>)> = Vec::new();
    for thread in 0..threads {
        let thread_id = format!("t{thread}");
        for batch in 0..per_thread / 500 {
            let messages: Vec<Message> = (0..500).map(|index| message(&format!("m{index}"))).collect();
            let embeddings = messages
                .iter()
                .enumerate()
                .map(|(index, message)| {
                    let seq = (batch * 500 + index) as u64;
                    let mut vector: Vec<f32> = (0..dimension).map(|_| 0.3 * noise()).collect();
                    vector[(thread * per_thread + seq as usize) % groups] += 1.0;
                    let vector = unit(&vector);
                    corpus.push((thread_id.clone(), seq, vector.clone()));
                    EmbeddingRecord { message_id: message.id.clone(), embedder: "test".into(), vector }
                })
                .collect();
            store.save_run(RunSave { embeddings, ..save(&thread_id, "big", messages) }).await.unwrap();
        }
    }
    let query = |group: usize| {
        let vector: Vec<f32> =
            (0..dimension).map(|d| if d == group { 1.0 } else { 0.05 * (d % 5) as f32 }).collect();
        VectorQuery {
            scope: RecallScope::Resource("big".into()),
            embedder: "test".into(),
            vector: unit(&vector),
            top_k: 3,
            threshold: None,
        }
    };
    let exact = |corpus: &[(String, u64, Vec<f32>)], query: &VectorQuery| {
        let mut scored: Vec<(f32, String, u64)> = corpus
            .iter()
            .map(|(thread, seq, vector)| {
                (vector.iter().zip(&query.vector).map(|(a, b)| a * b).sum(), thread.clone(), *seq)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.truncate(3);
        scored
    };
    let check = |corpus: &[(String, u64, Vec<f32>)], group: usize, hits: &[agentwire::storage::Hit]| {
        let expected = exact(corpus, &query(group));
        let found: Vec<(String, u64)> = hits.iter().map(|hit| (hit.thread_id.clone(), hit.seq)).collect();
        let wanted: Vec<(String, u64)> =
            expected.iter().map(|(_, thread, seq)| (thread.clone(), *seq)).collect();
        assert_eq!(found, wanted, "group {group}");
        for (hit, (score, _, _)) in hits.iter().zip(&expected) {
            assert!((hit.score - score).abs() < 1e-5, "an exact score: {} vs {score}", hit.score);
        }
    };
    for group in [0, 17, 40, 63] {
        check(&corpus, group, &store.search(query(group)).await.unwrap());
    }
    let loaded = store.recall_index_bytes();
    assert!(
        loaded > 0 && loaded < corpus.len() * dimension * 4 / 2,
        "{loaded} bytes: loaded, under half the f32s"
    );
    assert!(
        std::fs::read_dir(dir.path())
            .unwrap()
            .all(|entry| { !entry.unwrap().file_name().to_string_lossy().starts_with("recall-scratch") }),
        "the scratch file is unlinked"
    );

    store.delete_thread("big", "t2").await.unwrap();
    corpus.retain(|(thread, _, _)| thread != "t2");
    for group in [5, 17] {
        let hits = store.search(query(group)).await.unwrap();
        assert!(hits.iter().all(|hit| hit.thread_id != "t2"), "{hits:?}");
        check(&corpus, group, &hits);
    }
    let closest = message("closest");
    let axis = query(9).vector;
    let embedding =
        EmbeddingRecord { message_id: closest.id.clone(), embedder: "test".into(), vector: axis.clone() };
    store
        .save_run(RunSave { embeddings: vec![embedding], ..save("t0", "big", vec![closest]) })
        .await
        .unwrap();
    corpus.push(("t0".into(), per_thread as u64, axis));
    check(&corpus, 9, &store.search(query(9)).await.unwrap());
}

/// A save is all or nothing: one past the resource's quota, or with a stale working-memory
/// version, leaves no message, no thread and no usage behind.
#[tokio::test]
async fn a_refused_save_leaves_nothing() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let store: &dyn Store = &*backend.store;
        let quota = agentwire::domain::ResourceQuota { messages: Some(2), ..Default::default() };
        let over = RunSave { quota, ..save("t", "r", vec![message("1"), message("2"), message("3")]) };
        assert!(matches!(store.save_run(over).await, Err(StoreError::QuotaExceeded { .. })));
        assert!(store.get_thread("r", "t").await.unwrap().is_none());
        assert_eq!(store.usage("r").await.unwrap(), Default::default());

        let scope = WorkingMemoryScope::Resource("r".into());
        store.put_working_memory(&scope, "v1".into(), 0).await.unwrap();
        let stale = RunSave {
            working_memory: Some((scope.clone(), "stale".into(), 0)),
            ..save("t", "r", vec![message("lost?")])
        };
        assert!(matches!(store.save_run(stale).await, Err(StoreError::VersionConflict { .. })));
        assert!(store.last_messages("r", "t", 10).await.unwrap().is_empty());
        assert_eq!(store.get_working_memory(&scope).await.unwrap().unwrap().content, "v1");
        assert_eq!(store.usage("r").await.unwrap().messages, 0);
    }
}

/// Many runs saved at once, some refused by their resource's quota: what is kept is exactly
/// what saving them one by one would keep — on each thread consecutive seqs from 0, usage
/// counting each once, every kept message searchable with its own vector and no refused one.
/// The quota pre-check's read agrees. sled keeps the quota's worth exactly; PostgreSQL's quota
/// lets saves racing on other threads past it by what they add together (`lock_usage`), never
/// refusing one within it.
#[tokio::test]
async fn concurrent_saves_some_refused_keep_exactly_the_others() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let quota = agentwire::domain::ResourceQuota { messages: Some(30), ..Default::default() };
        let tasks: Vec<_> = (0..48)
            .map(|index| {
                let store = Arc::clone(&backend.store);
                let save = RunSave {
                    quota,
                    ..embedded(
                        &format!("t{}", index % 4),
                        "r",
                        &format!("m{index}"),
                        &[1.0, index as f32, 0.0],
                    )
                };
                tokio::spawn(async move { store.save_run(save).await })
            })
            .collect();
        let mut saved = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(()) => saved += 1,
                Err(StoreError::QuotaExceeded { .. }) => {}
                Err(other) => panic!("{other}"),
            }
        }
        let store: &dyn Store = &*backend.store;
        if backend.name == "sled" {
            assert_eq!(saved, 30);
        } else {
            assert!((30..48).contains(&saved), "{saved} saved");
        }
        // (thread, seq) → the score a search along the first axis gives the message's vector.
        let mut kept = Vec::new();
        for thread in 0..4 {
            let thread_id = format!("t{thread}");
            let messages = store.last_messages("r", &thread_id, 100).await.unwrap();
            let seqs: Vec<u64> = messages.iter().map(|stored| stored.seq).collect();
            assert_eq!(seqs, (0..messages.len() as u64).collect::<Vec<_>>(), "{thread_id}");
            assert_eq!(store.get_thread("r", &thread_id).await.unwrap().unwrap().next_seq, seqs.len() as u64);
            for stored in messages {
                let index: f32 = stored.message.text()[1..].parse().unwrap();
                kept.push((thread_id.clone(), stored.seq, 1.0 / (1.0 + index * index).sqrt()));
            }
        }
        assert_eq!(kept.len(), saved);
        assert_eq!(store.usage("r").await.unwrap().messages, saved as u64);
        let (usage, exists) = store.usage_with_thread("r", "t0").await.unwrap();
        assert_eq!((usage, exists), (store.usage("r").await.unwrap(), true));
        assert!(!store.usage_with_thread("r", "t9").await.unwrap().1, "t9 was never saved to");
        let query = VectorQuery {
            scope: RecallScope::Resource("r".into()),
            embedder: "test".into(),
            vector: unit(&[1.0, 0.0, 0.0]),
            top_k: 100,
            threshold: None,
        };
        let mut hits = store.search(query).await.unwrap();
        assert_eq!(hits.len(), saved, "every kept message is searchable, no refused one is");
        hits.sort_by(|a, b| (&a.thread_id, a.seq).cmp(&(&b.thread_id, b.seq)));
        kept.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        for (hit, (thread_id, seq, score)) in hits.iter().zip(&kept) {
            assert_eq!((&hit.thread_id, hit.seq), (thread_id, *seq));
            assert!((hit.score - score).abs() < 1e-3, "{hit:?} scores {score}: its own message's vector");
        }
    }
}

/// Two replicas on one database appending to one thread at once: every message is kept, with
/// consecutive seqs, and the resource's usage counts each once.
#[tokio::test]
async fn replicas_append_to_one_thread_at_once() {
    let Some((url, first)) = postgres::fresh_store().await else { return };
    let second = postgres::connect(&url).await;
    let mut tasks = Vec::new();
    for (replica, store) in [first.clone(), second.clone()].into_iter().enumerate() {
        for index in 0..10 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store.save_run(save("shared", "r", vec![message(&format!("{replica}-{index}"))])).await
            }));
        }
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let all = second.last_messages("r", "shared", 100).await.unwrap();
    assert_eq!(all.iter().map(|stored| stored.seq).collect::<Vec<_>>(), (0..20).collect::<Vec<_>>());
    let mut texts = texts(&all);
    texts.sort();
    assert_eq!(texts.len(), 20);
    texts.dedup();
    assert_eq!(texts.len(), 20, "no message twice");
    assert_eq!(first.usage("r").await.unwrap().messages, 20);
    assert_eq!(first.get_thread("r", "shared").await.unwrap().unwrap().next_seq, 20);
}

/// Two replicas updating one working memory concurrently, each retrying on a version conflict
/// as the memory processor does: no update is lost.
#[tokio::test]
async fn replicas_updating_one_working_memory_lose_nothing() {
    let Some((url, first)) = postgres::fresh_store().await else { return };
    let second = postgres::connect(&url).await;
    let scope = WorkingMemoryScope::Resource("r".into());
    let mut tasks = Vec::new();
    for (replica, store) in [first.clone(), second.clone()].into_iter().enumerate() {
        for index in 0..8 {
            let (store, scope) = (store.clone(), scope.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let current = store.get_working_memory(&scope).await.unwrap();
                    let (content, version) =
                        current.map_or((String::new(), 0), |record| (record.content, record.version));
                    let added = format!("{content}[{replica}-{index}]");
                    match store.put_working_memory(&scope, added, version).await {
                        Ok(_) => break,
                        Err(StoreError::VersionConflict { .. }) => continue,
                        Err(other) => panic!("{other}"),
                    }
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let record = first.get_working_memory(&scope).await.unwrap().unwrap();
    assert_eq!(record.version, 16);
    for replica in 0..2 {
        for index in 0..8 {
            assert!(record.content.contains(&format!("[{replica}-{index}]")), "{}", record.content);
        }
    }
}

/// Everything survives reconnecting (the schema applied once, not again), and a database whose
/// schema is newer than this binary's is refused with a message saying so.
#[tokio::test]
async fn postgres_keeps_data_and_refuses_a_newer_schema() {
    let Some((url, store)) = postgres::fresh_store().await else { return };
    store.save_run(embedded("t", "r", "remember me", &[1.0, 0.0])).await.unwrap();
    drop(store);
    let store = postgres::connect(&url).await;
    assert_eq!(texts(&store.last_messages("r", "t", 10).await.unwrap()), ["remember me"]);

    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let versions: i64 = client.query_one("SELECT count(*) FROM agentwire_schema", &[]).await.unwrap().get(0);
    assert_eq!(versions, i64::from(agentwire::storage::SCHEMA_VERSION));
    client.execute("INSERT INTO agentwire_schema VALUES (99, 0)", &[]).await.unwrap();
    let options = agentwire::storage::PgOptions {
        url: url.clone(),
        pool_size: 1,
        statement_timeout: std::time::Duration::from_secs(5),
        ef_search: 100,
        ca_file: None,
    };
    let error = agentwire::storage::PgStore::connect(&options).await.unwrap_err();
    assert_eq!(error, StoreError::SchemaTooNew { found: 99, supported: agentwire::storage::SCHEMA_VERSION });
    assert!(error.to_string().contains("schema version 99"), "{error}");
}

/// A database at schema 1, holding a thread, is upgraded in place at start: its messages stay,
/// and saves and working-memory writes go through the functions schema 2 adds.
#[tokio::test]
async fn postgres_upgrades_a_schema_1_database() {
    let Some(url) = postgres::fresh_database().await else { return };
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client.batch_execute(include_str!("../../src/storage/postgres/0001_schema.sql")).await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE agentwire_schema (version integer PRIMARY KEY, applied_at bigint NOT NULL);
             INSERT INTO agentwire_schema VALUES (1, 0);
             INSERT INTO threads (resource_id, id, created_at, updated_at, next_seq) VALUES ('r', 't', 0, 0, 1);",
        )
        .await
        .unwrap();
    let mut first = message("from schema 1");
    (first.thread_id, first.resource_id) = ("t".into(), "r".into());
    let record = serde_json::to_value(&first).unwrap();
    client
        .execute("INSERT INTO messages VALUES ('r', 't', 0, $1, $2, 10)", &[&first.id, &record])
        .await
        .unwrap();
    let store = postgres::connect(&url).await;
    let versions: Vec<i32> = client
        .query("SELECT version FROM agentwire_schema ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(versions, (1..=agentwire::storage::SCHEMA_VERSION as i32).collect::<Vec<_>>());
    store.save_run(embedded("t", "r", "after the upgrade", &[1.0, 0.0])).await.unwrap();
    let stored = store.last_messages("r", "t", 10).await.unwrap();
    assert_eq!(texts(&stored), ["from schema 1", "after the upgrade"]);
    assert_eq!(stored.iter().map(|message| message.seq).collect::<Vec<_>>(), [0, 1]);
    let scope = WorkingMemoryScope::Resource("r".into());
    assert_eq!(store.put_working_memory(&scope, "# notes".into(), 0).await.unwrap(), 1);
}

/// A run record started at `started_at` (ms) of `agent` on `resource`, ended so, with one hook
/// call of `processor`.
fn run_record(
    run_id: &str,
    started_at: i64,
    agent: &str,
    resource: &str,
    outcome: RunOutcome,
    processor: &str,
) -> RunRecord {
    RunRecord {
        run_id: run_id.into(),
        agent_id: agent.into(),
        thread_id: "t".into(),
        resource_id: resource.into(),
        key_name: String::new(),
        started_at,
        ended_at: started_at + 5,
        outcome,
        finish_reason: FinishReason::Stop,
        usage: Default::default(),
        tripwire: None,
        error: None,
        timeline: vec![TimelineEntry::Hook(HookCallRecord {
            processor_id: processor.into(),
            hook: agentwire::domain::Hook::ProcessInput,
            step: None,
            retry_count: 0,
            instance_id: None,
            at_us: 0,
            duration_us: 10,
            calls: 1,
            max_us: 10,
            decision: HookDecision::Continue,
        })],
        content: None,
    }
}

/// Three runs of two agents over two resources, one a tripwire, started a second apart.
fn three_runs() -> Vec<RunRecord> {
    vec![
        run_record("r1", 1_000, "echo", "alice", RunOutcome::Finished, "probe"),
        run_record("r2", 2_000, "guarded", "alice", RunOutcome::Tripwire, "guard"),
        run_record("r3", 3_000, "echo", "bob", RunOutcome::Finished, "probe"),
    ]
}

/// Run records: saved (a second save replaces), read back whole, listed newest first (by run
/// id, time-ordered in production) with every filter and in pages, pruned by age and by count,
/// and deleted with their resource.
#[tokio::test]
async fn run_records_are_kept_listed_and_pruned() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let store: &dyn Store = &*backend.store;
        let mut records = three_runs();
        records.push(run_record("r4", 3_000, "echo", "bob", RunOutcome::Error, "probe"));
        store.save_run_records(records.clone()).await.unwrap();
        store.save_run_records(vec![records[0].clone()]).await.unwrap();
        assert_eq!(store.get_run_record("r2").await.unwrap(), Some(records[1].clone()));
        assert_eq!(store.get_run_record("nope").await.unwrap(), None);

        let ids = |page: &RunPage| page.runs.iter().map(|run| run.run_id.clone()).collect::<Vec<_>>();
        let list = |filter: RunFilter| async move { store.list_run_records(&filter, "", 10).await.unwrap() };
        assert_eq!(
            ids(&list(RunFilter::default()).await),
            ["r4", "r3", "r2", "r1"],
            "newest first, by run id"
        );
        let by = |filter: RunFilter| async move { ids(&list(filter).await) };
        assert_eq!(by(RunFilter { resource_id: "alice".into(), ..Default::default() }).await, ["r2", "r1"]);
        assert_eq!(by(RunFilter { agent_id: "guarded".into(), ..Default::default() }).await, ["r2"]);
        assert_eq!(by(RunFilter { outcome: Some(RunOutcome::Error), ..Default::default() }).await, ["r4"]);
        assert_eq!(by(RunFilter { processor_id: "guard".into(), ..Default::default() }).await, ["r2"]);
        let window = RunFilter { since: Some(2_000), until: Some(3_000), ..Default::default() };
        assert_eq!(by(window).await, ["r2"]);
        let bob_thread = RunFilter { resource_id: "bob".into(), thread_id: "t".into(), ..Default::default() };
        assert_eq!(by(bob_thread).await, ["r4", "r3"]);

        let first = store.list_run_records(&RunFilter::default(), "", 3).await.unwrap();
        assert_eq!(ids(&first), ["r4", "r3", "r2"]);
        let rest = store.list_run_records(&RunFilter::default(), &first.next_cursor, 3).await.unwrap();
        assert_eq!((ids(&rest), rest.next_cursor.as_str()), (vec!["r1".to_owned()], ""));

        assert_eq!(store.prune_run_records(Some(1_500), None).await.unwrap(), 1, "r1 is too old");
        assert_eq!(store.prune_run_records(None, Some(2)).await.unwrap(), 1, "r2 is beyond the newest two");
        assert_eq!(ids(&list(RunFilter::default()).await), ["r4", "r3"]);
        assert_eq!(store.get_run_record("r2").await.unwrap(), None);

        store.delete_resource("bob").await.unwrap();
        assert!(list(RunFilter::default()).await.runs.is_empty());
        assert_eq!(store.get_run_record("r3").await.unwrap(), None);
    }
}

/// Tallies follow the same filters and order as listed records, the newest `limit` of them; a
/// tally read once follows its record when the run is saved again (a changed outcome), and
/// deleted runs are not tallied any more.
#[tokio::test]
async fn run_tallies_follow_their_records() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let store: &dyn Store = &*backend.store;
        let records = three_runs();
        store.save_run_records(records.clone()).await.unwrap();
        let tallied = |filter: RunFilter, limit: usize| async move {
            let tallies = store.run_tallies(&filter, limit).await.unwrap();
            tallies.iter().map(|tally| (tally.run_id.clone(), tally.outcome)).collect::<Vec<_>>()
        };
        let all = tallied(RunFilter::default(), 10).await;
        assert_eq!(
            all,
            [
                ("r3".to_owned(), RunOutcome::Finished),
                ("r2".to_owned(), RunOutcome::Tripwire),
                ("r1".to_owned(), RunOutcome::Finished)
            ]
        );
        assert_eq!(tallied(RunFilter::default(), 2).await, all[..2], "the newest two");
        let guard = RunFilter { processor_id: "guard".into(), ..Default::default() };
        assert_eq!(tallied(guard, 10).await, all[1..2]);
        let window = RunFilter { resource_id: "alice".into(), since: Some(1_500), ..Default::default() };
        assert_eq!(tallied(window, 10).await, all[1..2]);
        let agents = RunFilter { agents: Some(IdPatterns::new(vec!["echo".into()])), ..Default::default() };
        assert_eq!(tallied(agents, 10).await, [all[0].clone(), all[2].clone()]);

        let mut failed = records[2].clone();
        failed.outcome = RunOutcome::Error;
        store.save_run_records(vec![failed]).await.unwrap();
        assert_eq!(tallied(RunFilter::default(), 1).await, [("r3".to_owned(), RunOutcome::Error)]);
        store.delete_resource("alice").await.unwrap();
        assert_eq!(tallied(RunFilter::default(), 10).await, [("r3".to_owned(), RunOutcome::Error)]);
    }
}

/// Claims of new resources by one key at once never count past its allowance: of 20 at once
/// with room for 5, exactly 5 succeed; a resource it has is claimed again freely, and a deleted
/// one gives its place back.
#[tokio::test]
async fn resource_claims_at_once_stay_within_the_allowance() {
    for backend in backends().await {
        eprintln!("backend: {}", backend.name);
        let allowance = ResourceAllowance { key_name: "k".into(), max_resources: 5 };
        let claims = (0..20).map(|index| {
            let (store, allowance) = (Arc::clone(&backend.store), allowance.clone());
            tokio::spawn(async move { store.claim_resource(&allowance, &format!("r{index}")).await })
        });
        let mut claimed = Vec::new();
        for (index, claim) in claims.enumerate() {
            match claim.await.unwrap() {
                Ok(()) => claimed.push(format!("r{index}")),
                Err(error) => {
                    assert!(matches!(error, StoreError::AllowanceExceeded { limit: 5, .. }), "{error}")
                }
            }
        }
        assert_eq!(claimed.len(), 5, "{claimed:?}");
        let store = &backend.store;
        store.claim_resource(&allowance, &claimed[0]).await.unwrap();
        assert!(store.claim_resource(&allowance, "new").await.is_err());
        store.delete_resource(&claimed[0]).await.unwrap();
        store.claim_resource(&allowance, "new").await.unwrap();
    }
}

/// sled keeps run records a page per batch: after reopening, every record is found again where
/// pruning and `DeleteResource` left it (pages rewritten without the removed records), and a
/// store written before pages (a `runs` tree, a key per record) has its records moved into pages.
#[tokio::test]
async fn sled_run_records_survive_reopening_and_older_stores_are_moved_into_pages() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<RunRecord> = (0..10)
        .map(|index| {
            let resource = if index % 2 == 0 { "even" } else { "odd" };
            run_record(
                &format!("r{index:02}"),
                1_000 * (index + 1),
                "echo",
                resource,
                RunOutcome::Finished,
                "probe",
            )
        })
        .collect();
    {
        let store = SledStore::open(dir.path()).unwrap();
        store.save_run_records(records[..6].to_vec()).await.unwrap();
        store.save_run_records(records[6..].to_vec()).await.unwrap();
        assert_eq!(store.prune_run_records(None, Some(8)).await.unwrap(), 2, "r00 and r01 go");
        store.delete_resource("odd").await.unwrap();
    }
    let store = SledStore::open(dir.path()).unwrap();
    let listed = store.list_run_records(&RunFilter::default(), "", 100).await.unwrap();
    let ids: Vec<&str> = listed.runs.iter().map(|run| run.run_id.as_str()).collect();
    assert_eq!(ids, ["r08", "r06", "r04", "r02"]);
    assert_eq!(store.get_run_record("r04").await.unwrap().as_ref(), Some(&records[4]));
    assert_eq!(store.get_run_record("r05").await.unwrap(), None);
    store.save_run_records(vec![records[9].clone()]).await.unwrap();
    let odd = RunFilter { resource_id: "odd".into(), ..Default::default() };
    assert_eq!(store.list_run_records(&odd, "", 10).await.unwrap().runs, [records[9].clone()]);
    drop(store);

    let legacy_dir = tempfile::tempdir().unwrap();
    {
        let db = sled::open(legacy_dir.path()).unwrap();
        let runs = db.open_tree("runs").unwrap();
        for record in &records[..3] {
            runs.insert(record.run_id.as_bytes(), serde_json::to_vec(record).unwrap()).unwrap();
        }
        db.open_tree("resource_runs").unwrap().insert(b"even|r00", &[]).unwrap();
        db.flush().unwrap();
    }
    let store = SledStore::open(legacy_dir.path()).unwrap();
    let moved = store.list_run_records(&RunFilter::default(), "", 10).await.unwrap();
    assert_eq!(moved.runs, [records[2].clone(), records[1].clone(), records[0].clone()]);
    let even = RunFilter { resource_id: "even".into(), ..Default::default() };
    assert_eq!(store.list_run_records(&even, "", 10).await.unwrap().runs.len(), 2);
    drop(store);
    let store = SledStore::open(legacy_dir.path()).unwrap();
    assert_eq!(
        store.list_run_records(&RunFilter::default(), "", 10).await.unwrap().runs.len(),
        3,
        "moved once"
    );
}
