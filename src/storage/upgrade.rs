//! Upgrades a data directory written in an older storage format when it is opened, by rewriting
//! it into the current layout beside itself and swapping it in (as compaction does: a crash at
//! any point leaves one whole store, in one format or the other).
//!
//! Format 1 → 2: threads, their messages and their working memory are keyed by resource as well
//! as by thread, message ids by resource instead of globally (`message_ids` becomes
//! `resource_message_ids`), and each resource's usage (threads, messages, bytes, for quotas) is
//! counted into `resource_usage`. The response cache is left behind: it is a cache.

use std::collections::HashMap;
use std::path::Path;

use super::compaction::rewrite;
use super::sled_codec::{Batched, copy_tree, decode, engine};
use super::{ResourceUsage, StoreError, Thread, WorkingMemoryScope, keys};

/// Rewrites the format-1 store in `path` in the current format (the caller has closed it).
pub(super) fn from_format_1(path: &Path) -> Result<(), StoreError> {
    let upgraded = rewrite(path, from_v1)?;
    tracing::info!(records = upgraded.records, "storage format 1 upgraded to 2: ids are scoped by resource");
    Ok(())
}

/// The string a key starts with and what follows it; `Corrupt` naming `tree` otherwise.
fn split(tree: &'static str, key: &[u8]) -> Result<(String, Vec<u8>), StoreError> {
    keys::leading_str(key)
        .map(|(leading, rest)| (leading, rest.to_vec()))
        .ok_or_else(|| StoreError::Corrupt { tree, reason: "malformed key".to_owned() })
}

/// Writes the format-1 database `live` into `copy` in format 2.
fn from_v1(live: &sled::Db, copy: &sled::Db) -> Result<u64, StoreError> {
    let tree = |db: &sled::Db, name: &str| db.open_tree(name).map_err(engine);
    let mut written = 0u64;
    let mut usage: HashMap<String, ResourceUsage> = HashMap::new();

    // Threads, and whose each is.
    let mut resource_of: HashMap<String, String> = HashMap::new();
    let (threads, mut into) = (tree(live, "threads")?, tree(copy, "threads")?);
    let mut writer = Batched::into(&into);
    for entry in threads.iter() {
        let (_, record) = entry.map_err(engine)?;
        let thread = decode::<Thread>("threads", &record)?;
        writer.insert(keys::thread(&thread.resource_id, &thread.id), record)?;
        usage.entry(thread.resource_id.clone()).or_default().threads += 1;
        resource_of.insert(thread.id, thread.resource_id);
    }
    written += writer.finish()?;

    // Messages (of threads that exist), and their ids.
    into = tree(copy, "messages")?;
    let mut writer = Batched::into(&into);
    for entry in tree(live, "messages")?.iter() {
        let (key, record) = entry.map_err(engine)?;
        let (thread_id, seq) = split("messages", &key)?;
        let Some(resource_id) = resource_of.get(&thread_id) else { continue };
        let mut moved = keys::messages_prefix(resource_id, &thread_id);
        moved.extend_from_slice(&seq);
        let counted = usage.entry(resource_id.clone()).or_default();
        counted.messages += 1;
        counted.bytes += record.len() as u64;
        writer.insert(moved, record)?;
    }
    written += writer.finish()?;
    into = tree(copy, "resource_message_ids")?;
    let mut writer = Batched::into(&into);
    for entry in tree(live, "message_ids")?.iter() {
        let (key, message_key) = entry.map_err(engine)?;
        let (message_id, _) = split("message_ids", &key)?;
        let (thread_id, seq) = split("message_ids", &message_key)?;
        let Some(resource_id) = resource_of.get(&thread_id) else { continue };
        let mut moved = keys::messages_prefix(resource_id, &thread_id);
        moved.extend_from_slice(&seq);
        writer.insert(keys::message_id(resource_id, &message_id), moved)?;
    }
    written += writer.finish()?;

    // Working memory: a thread's is keyed by its resource too.
    into = tree(copy, "working_memory")?;
    let mut writer = Batched::into(&into);
    for entry in tree(live, "working_memory")?.iter() {
        let (key, record) = entry.map_err(engine)?;
        match key.first() {
            Some(b't') => {
                let (thread_id, _) = split("working_memory", &key[1..])?;
                let Some(resource_id) = resource_of.get(&thread_id) else { continue };
                let scope = WorkingMemoryScope::Thread { resource_id: resource_id.clone(), thread_id };
                writer.insert(keys::working_memory(&scope), record)?;
            }
            _ => writer.insert(key, record)?,
        }
    }
    written += writer.finish()?;

    // Vectors were keyed by resource already; their bytes count.
    into = tree(copy, "vectors")?;
    let mut writer = Batched::into(&into);
    for entry in tree(live, "vectors")?.iter() {
        let (key, vector) = entry.map_err(engine)?;
        let (resource_id, _) = split("vectors", &key)?;
        usage.entry(resource_id).or_default().bytes += vector.len() as u64;
        writer.insert(key, vector)?;
    }
    written += writer.finish()?;

    into = tree(copy, "resource_usage")?;
    let mut writer = Batched::into(&into);
    for (resource_id, counted) in &usage {
        writer.insert(keys::resource_usage(resource_id), &counted.encode())?;
    }
    written += writer.finish()?;

    // Everything else as it is, but the response cache; then the new format.
    let rewritten = ["threads", "messages", "message_ids", "working_memory", "vectors", "response_cache"];
    for name in live.tree_names() {
        if rewritten.iter().any(|done| name.as_ref() == done.as_bytes()) {
            continue;
        }
        written +=
            copy_tree(&live.open_tree(&name).map_err(engine)?, &copy.open_tree(&name).map_err(engine)?)?;
    }
    tree(copy, "meta")?.insert(keys::META_FORMAT, &keys::FORMAT_VERSION.to_be_bytes()).map_err(engine)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Message, Part, Role};
    use crate::storage::{RunSave, SledStore, Store};

    /// A string as format 1's keys held it: length-prefixed.
    fn v1_str(value: &str) -> Vec<u8> {
        let mut key = u16::try_from(value.len()).unwrap().to_be_bytes().to_vec();
        key.extend_from_slice(value.as_bytes());
        key
    }

    fn message(id: &str, text: &str) -> Message {
        let mut message = Message::new(Role::User, vec![Part::text(text)]);
        message.id = id.to_owned();
        message.thread_id = "t".into();
        message.resource_id = "alice".into();
        message
    }

    /// A format-1 data directory opens as format 2: its thread, messages, thread working memory
    /// and message ids are alice's, counted for her quota; bob's thread of the same id is another
    /// thread; the old layout is gone.
    #[tokio::test]
    async fn format_1_is_upgraded_in_place() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = sled::open(dir.path()).unwrap();
            db.open_tree("meta").unwrap().insert(keys::META_FORMAT, &1u32.to_be_bytes()).unwrap();
            let thread = Thread {
                id: "t".into(),
                resource_id: "alice".into(),
                title: "Kept".into(),
                metadata: Default::default(),
                created_at: 1,
                updated_at: 1,
                next_seq: 1,
            };
            db.open_tree("threads")
                .unwrap()
                .insert(v1_str("t"), serde_json::to_vec(&thread).unwrap())
                .unwrap();
            let mut message_key = v1_str("t");
            message_key.extend_from_slice(&0u64.to_be_bytes());
            let record = serde_json::to_vec(&message("m-1", "from format 1")).unwrap();
            db.open_tree("messages").unwrap().insert(&message_key, record).unwrap();
            db.open_tree("message_ids").unwrap().insert(v1_str("m-1"), message_key).unwrap();
            let mut orphan = v1_str("gone");
            orphan.extend_from_slice(&0u64.to_be_bytes());
            db.open_tree("message_ids").unwrap().insert(v1_str("orphan"), orphan).unwrap();
            let mut notes = vec![b't'];
            notes.extend_from_slice(&v1_str("t"));
            let record = serde_json::json!({ "content": "thread notes", "version": 1, "updated_at": 1 });
            db.open_tree("working_memory")
                .unwrap()
                .insert(notes, serde_json::to_vec(&record).unwrap())
                .unwrap();
            db.flush().unwrap();
        }
        let store = SledStore::open(dir.path()).unwrap();
        let texts = |stored: Vec<crate::storage::StoredMessage>| -> Vec<String> {
            stored.iter().map(|stored| stored.message.text()).collect()
        };
        assert_eq!(store.get_thread("alice", "t").await.unwrap().unwrap().title, "Kept");
        assert_eq!(texts(store.last_messages("alice", "t", 10).await.unwrap()), ["from format 1"]);
        let resend = RunSave {
            thread_id: "t".into(),
            resource_id: "alice".into(),
            messages: vec![message("m-1", "a resend")],
            embeddings: Vec::new(),
            working_memory: None,
            quota: Default::default(),
        };
        store.save_run(resend.clone()).await.unwrap();
        assert_eq!(texts(store.last_messages("alice", "t", 10).await.unwrap()), ["from format 1"]);
        store.save_run(RunSave { resource_id: "bob".into(), ..resend }).await.unwrap();
        assert_eq!(texts(store.last_messages("bob", "t", 10).await.unwrap()), ["a resend"]);
        let scope = WorkingMemoryScope::Thread { resource_id: "alice".into(), thread_id: "t".into() };
        assert_eq!(store.get_working_memory(&scope).await.unwrap().unwrap().content, "thread notes");
        let alice = store.usage("alice").await.unwrap();
        assert_eq!((alice.threads, alice.messages), (1, 1), "format 1's data is counted");
        assert!(alice.bytes > 0);
        drop(store);

        let db = sled::open(dir.path()).unwrap();
        let format = db.open_tree("meta").unwrap().get(keys::META_FORMAT).unwrap().unwrap();
        assert_eq!(format.as_ref(), keys::FORMAT_VERSION.to_be_bytes());
        assert!(!db.tree_names().iter().any(|name| name.as_ref() == b"message_ids"), "the old tree is gone");
    }
}
