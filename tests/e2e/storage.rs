//! The `Store` contract, run against the sled store. Written against `&dyn Store` so that any
//! later backend can run the same suite.

use agentwire::domain::{Message, Part, Role};
use agentwire::storage::{
    CacheScope, Direction, EmbeddingRecord, NewThread, RecallScope, RunSave, SledStore, Store, StoreError,
    ThreadUpdate, VectorQuery, WorkingMemoryScope,
};

fn open() -> (tempfile::TempDir, SledStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    (dir, store)
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
    let (_dir, store) = open();
    let store: &dyn Store = &store;
    let first = message("one");
    store.save_run(save("t", "r", vec![first.clone(), message("two")])).await.unwrap();
    store.save_run(save("t", "r", vec![first, message("three")])).await.unwrap();
    let thread = store.get_thread("r", "t").await.unwrap().expect("created");
    assert_eq!(thread.resource_id, "r");
    assert_eq!(thread.next_seq, 3);
    let all = store.last_messages("r", "t", 10).await.unwrap();
    assert_eq!(texts(&all), ["one", "two", "three"]);
    assert_eq!(all.iter().map(|stored| stored.seq).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(all.iter().all(|stored| stored.message.thread_id == "t" && stored.message.resource_id == "r"));
    assert_eq!(texts(&store.last_messages("r", "t", 2).await.unwrap()), ["two", "three"]);
}

/// Message ids are scoped by resource: an id one resource used neither hides another
/// resource's message with the same id nor is it seen there; within a resource it still makes
/// saving idempotent.
#[tokio::test]
async fn message_ids_are_scoped_by_resource() {
    let (_dir, store) = open();
    let store: &dyn Store = &store;
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

/// Thread ids are a resource's own: another resource's thread of the same id is another thread,
/// and neither sees the other's messages.
#[tokio::test]
async fn thread_ids_are_scoped_by_resource() {
    let (_dir, store) = open();
    store.save_run(save("t", "alice", vec![message("alice's")])).await.unwrap();
    store.save_run(save("t", "mallory", vec![message("mallory's")])).await.unwrap();
    assert_eq!(texts(&store.last_messages("alice", "t", 10).await.unwrap()), ["alice's"]);
    assert_eq!(texts(&store.last_messages("mallory", "t", 10).await.unwrap()), ["mallory's"]);
    assert_eq!(store.get_thread("alice", "t").await.unwrap().unwrap().resource_id, "alice");
    store.delete_thread("mallory", "t").await.unwrap();
    assert_eq!(texts(&store.last_messages("alice", "t", 10).await.unwrap()), ["alice's"]);
    assert!(store.get_thread("mallory", "t").await.unwrap().is_none());
}

/// Threads list newest first, in pages; messages page both ways; neighbours come deduplicated.
#[tokio::test]
async fn paging_and_neighbours() {
    let (_dir, store) = open();
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
    let (_dir, store) = open();
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

/// Working memory is versioned: a write based on a stale version is refused.
#[tokio::test]
async fn working_memory_writes_are_versioned() {
    let (_dir, store) = open();
    let scope = WorkingMemoryScope::Resource("r".into());
    assert!(store.get_working_memory(&scope).await.unwrap().is_none());
    assert_eq!(store.put_working_memory(&scope, "# v1".into(), 0).await.unwrap(), 1);
    assert_eq!(store.put_working_memory(&scope, "# v2".into(), 1).await.unwrap(), 2);
    let stale = store.put_working_memory(&scope, "# lost?".into(), 1).await.unwrap_err();
    assert!(matches!(stale, StoreError::VersionConflict { expected: 1, found: 2, .. }));
    assert_eq!(store.get_working_memory(&scope).await.unwrap().unwrap().content, "# v2");
}

/// Deleting a thread takes its messages, embeddings and working memory; deleting a resource takes
/// all of its threads and reports the counts.
#[tokio::test]
async fn deletes_cascade_and_report_counts() {
    let (_dir, store) = open();
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
    assert_eq!((report.threads, report.messages, report.embeddings, report.working_memories), (1, 1, 1, 1));
    assert!(store.get_thread("alice", "a1").await.unwrap().is_none());
    assert!(store.last_messages("alice", "a1", 10).await.unwrap().is_empty());
    assert_eq!(
        store.delete_thread("alice", "a1").await.unwrap_err(),
        StoreError::ThreadNotFound("a1".into())
    );

    let report = store.delete_resource("alice").await.unwrap();
    assert_eq!((report.threads, report.messages, report.embeddings, report.working_memories), (1, 2, 1, 1));
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

/// A data directory written in another storage format is refused at open, not misread.
#[tokio::test]
async fn an_unknown_storage_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(SledStore::open(dir.path()).unwrap());
    {
        let raw = sled::open(dir.path()).unwrap();
        raw.open_tree("meta").unwrap().insert("format_version", &99u32.to_be_bytes()).unwrap();
        raw.flush().unwrap();
    }
    let error = SledStore::open(dir.path()).unwrap_err();
    assert_eq!(error, StoreError::UnsupportedFormat { found: 99, supported: 2 });
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
    let (_dir, store) = open();
    let store: &dyn Store = &store;
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

/// Recall's in-memory vectors stay within their budget: searching many resources drops the least
/// recently searched ones, and a dropped resource searched again is read back from disk with the
/// same results.
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
    assert!(one_resource > 50 * dimension * 4, "{one_resource} bytes for 50 vectors of {dimension}");
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
}
