//! Upgrades a data directory written in an older storage format, in place, when it is opened.
//!
//! Format 1 → 2: message ids move from the global `message_ids` tree (id → message key) to
//! `resource_message_ids` (resource | id → message key), and each resource's usage (threads,
//! messages, bytes, for quotas) is counted into `resource_usage`. Both are idempotent: a crash
//! midway leaves format 1 recorded and the next open does it again; the old tree is dropped only
//! once the new format is on disk.

use std::collections::HashMap;

use super::sled_codec::{Batched, decode, engine};
use super::{ResourceUsage, StoreError, Thread, keys};

/// Upgrades a format-1 database to format 2.
pub(super) fn from_v1(db: &sled::Db) -> Result<(), StoreError> {
    let global = db.open_tree("message_ids").map_err(engine)?;
    let scoped = db.open_tree("resource_message_ids").map_err(engine)?;
    let threads = db.open_tree("threads").map_err(engine)?;
    let mut resource_of: HashMap<String, Option<String>> = HashMap::new();
    let mut writer = Batched::into(&scoped);
    for entry in global.iter() {
        let (id_key, message_key) = entry.map_err(engine)?;
        let corrupt =
            || StoreError::Corrupt { tree: "message_ids", reason: "malformed key or value".to_owned() };
        let message_id = keys::leading_str(&id_key).ok_or_else(corrupt)?;
        let thread_id = keys::leading_str(&message_key).ok_or_else(corrupt)?;
        if !resource_of.contains_key(&thread_id) {
            let resource = match threads.get(keys::thread(&thread_id)).map_err(engine)? {
                Some(bytes) => Some(decode::<Thread>("threads", &bytes)?.resource_id),
                None => None, // a thread deleted in between: its ids go with it
            };
            resource_of.insert(thread_id.clone(), resource);
        }
        let Some(Some(resource_id)) = resource_of.get(&thread_id) else { continue };
        writer.insert(keys::message_id(resource_id, &message_id), message_key)?;
    }
    let copied = writer.finish()?;
    count_usage(db)?;
    db.flush().map_err(engine)?;
    let meta = db.open_tree("meta").map_err(engine)?;
    meta.insert(keys::META_FORMAT, &keys::FORMAT_VERSION.to_be_bytes()).map_err(engine)?;
    db.flush().map_err(engine)?;
    db.drop_tree("message_ids").map_err(engine)?;
    tracing::info!(
        message_ids = copied,
        "storage format 1 upgraded to 2: message ids are scoped by resource"
    );
    Ok(())
}

/// Counts every resource's threads, messages and message bytes into `resource_usage`.
fn count_usage(db: &sled::Db) -> Result<(), StoreError> {
    let threads = db.open_tree("threads").map_err(engine)?;
    let messages = db.open_tree("messages").map_err(engine)?;
    let vectors = db.open_tree("vectors").map_err(engine)?;
    let mut usage: HashMap<String, ResourceUsage> = HashMap::new();
    for entry in threads.iter() {
        let (_, record) = entry.map_err(engine)?;
        let thread = decode::<Thread>("threads", &record)?;
        let counted = usage.entry(thread.resource_id.clone()).or_default();
        counted.threads += 1;
        for message in messages.scan_prefix(keys::messages_prefix(&thread.id)).values() {
            counted.messages += 1;
            counted.bytes += message.map_err(engine)?.len() as u64;
        }
        for vector in
            vectors.scan_prefix(keys::thread_vectors_prefix(&thread.resource_id, &thread.id)).values()
        {
            counted.bytes += vector.map_err(engine)?.len() as u64;
        }
    }
    let tree = db.open_tree("resource_usage").map_err(engine)?;
    for (resource_id, counted) in usage {
        tree.insert(keys::resource_usage(&resource_id), &counted.encode()).map_err(engine)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Message, Part, Role};
    use crate::storage::{RunSave, SledStore, Store};

    /// A key of format 1's `message_ids`: the id, length-prefixed.
    fn v1_message_id(id: &str) -> Vec<u8> {
        let mut key = u16::try_from(id.len()).unwrap().to_be_bytes().to_vec();
        key.extend_from_slice(id.as_bytes());
        key
    }

    fn message(id: &str, text: &str) -> Message {
        let mut message = Message::new(Role::User, vec![Part::text(text)]);
        message.id = id.to_owned();
        message
    }

    fn save(thread: &str, resource: &str, message: Message) -> RunSave {
        RunSave {
            thread_id: thread.into(),
            resource_id: resource.into(),
            messages: vec![message],
            embeddings: Vec::new(),
            working_memory: None,
            quota: Default::default(),
        }
    }

    /// A format-1 data directory opens as format 2: its message ids keep saving idempotent in
    /// their own resource, no longer hide another resource's messages, and the old tree is gone.
    #[tokio::test]
    async fn format_1_is_upgraded_in_place() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = sled::open(dir.path()).unwrap();
            db.open_tree("meta").unwrap().insert(keys::META_FORMAT, &1u32.to_be_bytes()).unwrap();
            let thread = Thread {
                id: "t".into(),
                resource_id: "alice".into(),
                title: String::new(),
                metadata: Default::default(),
                created_at: 1,
                updated_at: 1,
                next_seq: 1,
            };
            db.open_tree("threads")
                .unwrap()
                .insert(keys::thread("t"), serde_json::to_vec(&thread).unwrap())
                .unwrap();
            let mut stored = message("m-1", "from format 1");
            stored.thread_id = "t".into();
            stored.resource_id = "alice".into();
            let message_key = keys::message("t", 0);
            db.open_tree("messages")
                .unwrap()
                .insert(&message_key, serde_json::to_vec(&stored).unwrap())
                .unwrap();
            db.open_tree("message_ids").unwrap().insert(v1_message_id("m-1"), message_key).unwrap();
            db.open_tree("message_ids")
                .unwrap()
                .insert(v1_message_id("orphan"), keys::message("gone", 0))
                .unwrap();
            db.flush().unwrap();
        }
        let store = SledStore::open(dir.path()).unwrap();
        store.save_run(save("t", "alice", message("m-1", "a resend"))).await.unwrap();
        let texts = |stored: Vec<crate::storage::StoredMessage>| -> Vec<String> {
            stored.iter().map(|stored| stored.message.text()).collect()
        };
        assert_eq!(texts(store.last_messages("t", 10).await.unwrap()), ["from format 1"]);
        store.save_run(save("b", "bob", message("m-1", "bob's own"))).await.unwrap();
        assert_eq!(texts(store.last_messages("b", 10).await.unwrap()), ["bob's own"]);
        let alice = store.usage("alice").await.unwrap();
        assert_eq!((alice.threads, alice.messages), (1, 1), "format 1's data is counted");
        assert!(alice.bytes > 0);
        drop(store);

        let db = sled::open(dir.path()).unwrap();
        let format = db.open_tree("meta").unwrap().get(keys::META_FORMAT).unwrap().unwrap();
        assert_eq!(format.as_ref(), keys::FORMAT_VERSION.to_be_bytes());
        assert!(
            !db.tree_names().iter().any(|name| name.as_ref() == b"message_ids"),
            "the old tree is dropped"
        );
    }
}
