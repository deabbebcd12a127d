//! Every sled key, encoded in one place. Strings are length-prefixed (u16 big-endian) so that no
//! id is a prefix of another's key; numbers are big-endian so keys sort numerically.

use super::CacheScope;

/// The storage format this build reads and writes, recorded at open. 2: threads, their messages
/// and working memory, and message ids are keyed by resource (format 1 keyed them by thread or
/// message id alone, across resources). 3: a vector may be a pointer into the vector file
/// (`vector_file.rs`) and a page of run records a pointer into a segment (`run_segments.rs`)
/// instead of inline, so a build that reads only format 2 refuses the store rather than misread
/// it.
pub(super) const FORMAT_VERSION: u32 = 3;
/// The format whose stores this build opens as they are: format 3 reads its inline vectors.
pub(super) const FORMAT_INLINE_VECTORS: u32 = 2;
/// `meta` key of the embedder that made the stored vectors (`id/dimension`).
pub(super) const META_EMBEDDER: &[u8] = b"embedder";
/// `meta` key of the format version.
pub(super) const META_FORMAT: &[u8] = b"format_version";
/// `meta` key of the last open (milliseconds since the epoch): the write that proves an opened
/// database can write.
pub(super) const META_OPENED: &[u8] = b"opened_at";

fn push_str(key: &mut Vec<u8>, value: &str) {
    let length = u16::try_from(value.len()).unwrap_or(u16::MAX);
    key.extend_from_slice(&length.to_be_bytes());
    key.extend_from_slice(&value.as_bytes()[..usize::from(length)]);
}

fn string_key(value: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + value.len());
    push_str(&mut key, value);
    key
}

/// `threads`: resource | thread id → thread.
pub(super) fn thread(resource_id: &str, thread_id: &str) -> Vec<u8> {
    let mut key = string_key(resource_id);
    push_str(&mut key, thread_id);
    key
}

/// `resource_threads` prefix of a resource.
pub(super) fn resource_threads_prefix(resource_id: &str) -> Vec<u8> {
    string_key(resource_id)
}

/// `resource_threads`: resource | created_at | thread id → (). Listing a prefix in reverse gives
/// a resource's threads newest first.
pub(super) fn resource_thread(resource_id: &str, created_at: i64, thread_id: &str) -> Vec<u8> {
    let mut key = resource_threads_prefix(resource_id);
    key.extend_from_slice(&u64::try_from(created_at).unwrap_or(0).to_be_bytes());
    push_str(&mut key, thread_id);
    key
}

/// `resource_usage`: resource → its [`super::ResourceUsage`].
pub(super) fn resource_usage(resource_id: &str) -> Vec<u8> {
    string_key(resource_id)
}

/// `messages` prefix of a thread.
pub(super) fn messages_prefix(resource_id: &str, thread_id: &str) -> Vec<u8> {
    thread(resource_id, thread_id)
}

/// `messages`: resource | thread | seq → message.
pub(super) fn message(resource_id: &str, thread_id: &str, seq: u64) -> Vec<u8> {
    let mut key = messages_prefix(resource_id, thread_id);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The seq at the end of a `messages` key.
pub(super) fn seq_of_message_key(key: &[u8]) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&key[key.len() - 8..]);
    u64::from_be_bytes(bytes)
}

/// `resource_message_ids`: resource | message id → `messages` key. Scoped by resource, so one
/// tenant's ids neither hide another's messages nor tell it which ids exist elsewhere.
pub(super) fn message_id(resource_id: &str, message_id: &str) -> Vec<u8> {
    let mut key = string_key(resource_id);
    push_str(&mut key, message_id);
    key
}

/// The string a key starts with, and the rest of the key (format 1's thread id of a `messages`
/// key, a message id of its `message_ids`).
pub(super) fn leading_str(key: &[u8]) -> Option<(String, &[u8])> {
    let length = usize::from(u16::from_be_bytes([*key.first()?, *key.get(1)?]));
    Some((String::from_utf8(key.get(2..2 + length)?.to_vec()).ok()?, key.get(2 + length..)?))
}

/// `vectors` prefix of a resource.
pub(super) fn vectors_prefix(resource_id: &str) -> Vec<u8> {
    string_key(resource_id)
}

/// `vectors` prefix of one thread of a resource.
pub(super) fn thread_vectors_prefix(resource_id: &str, thread_id: &str) -> Vec<u8> {
    let mut key = vectors_prefix(resource_id);
    push_str(&mut key, thread_id);
    key
}

/// `vectors`: resource | thread | seq → embedding.
pub(super) fn vector(resource_id: &str, thread_id: &str, seq: u64) -> Vec<u8> {
    let mut key = thread_vectors_prefix(resource_id, thread_id);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The thread id and seq of a `vectors` key.
pub(super) fn parse_vector_key(key: &[u8]) -> Option<(String, u64)> {
    let resource_length = usize::from(u16::from_be_bytes([*key.first()?, *key.get(1)?]));
    let thread_start = 2 + resource_length;
    let thread_length =
        usize::from(u16::from_be_bytes([*key.get(thread_start)?, *key.get(thread_start + 1)?]));
    let thread_bytes = key.get(thread_start + 2..thread_start + 2 + thread_length)?;
    let seq_bytes: [u8; 8] = key.get(thread_start + 2 + thread_length..)?.try_into().ok()?;
    Some((String::from_utf8(thread_bytes.to_vec()).ok()?, u64::from_be_bytes(seq_bytes)))
}

/// `working_memory`: `r` | resource, or `t` | resource | thread → record.
pub(super) fn working_memory(scope: &super::WorkingMemoryScope) -> Vec<u8> {
    let (kind, id) = match scope {
        super::WorkingMemoryScope::Resource(id) => (b'r', id),
        super::WorkingMemoryScope::Thread { resource_id, thread_id } => {
            let mut key = vec![b't'];
            push_str(&mut key, resource_id);
            push_str(&mut key, thread_id);
            return key;
        }
    };
    let mut key = vec![kind];
    push_str(&mut key, id);
    key
}

/// Parses a cursor made of a key (hex); empty for "from the start".
pub(super) fn decode_cursor(cursor: &str) -> Option<Vec<u8>> {
    if !cursor.len().is_multiple_of(2) {
        return None;
    }
    (0..cursor.len()).step_by(2).map(|index| u8::from_str_radix(&cursor[index..index + 2], 16).ok()).collect()
}

/// A key as an opaque cursor.
pub(super) fn encode_cursor(key: &[u8]) -> String {
    key.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// `response_cache` prefix of a scope.
pub(super) fn cache_prefix(scope: &CacheScope) -> Vec<u8> {
    string_key(&scope.key())
}

/// `response_cache`: scope | key → expires_at (u64, big-endian) | value.
pub(super) fn cache(scope: &CacheScope, key: &str) -> Vec<u8> {
    let mut entry = cache_prefix(scope);
    push_str(&mut entry, key);
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No thread's keys fall under another thread's prefix, even when one id prefixes the other.
    #[test]
    fn prefixes_do_not_collide() {
        let short = message("r", "a", 1);
        let long_prefix = messages_prefix("r", "ab");
        assert!(!short.starts_with(&long_prefix));
        assert!(!message("r", "ab", 1).starts_with(&messages_prefix("r", "a")));
        assert!(!message("ra", "b", 1).starts_with(&messages_prefix("r", "ab")));
        assert!(message("r", "t", 2) > message("r", "t", 1));
        assert!(message("r", "t", 256) > message("r", "t", 255));
    }

    /// Vector keys give back their thread and seq; cursors round-trip.
    #[test]
    fn vector_keys_and_cursors_round_trip() {
        let key = vector("user-1", "thread-9", 42);
        assert_eq!(parse_vector_key(&key), Some(("thread-9".to_owned(), 42)));
        assert_eq!(leading_str(&string_key("thread-9")).map(|(id, _)| id), Some("thread-9".to_owned()));
        assert_eq!(decode_cursor(&encode_cursor(&key)), Some(key));
        assert_eq!(decode_cursor("zz"), None);
    }
}
