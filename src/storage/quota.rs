//! What a resource keeps now — threads, messages, and the bytes of its messages with their
//! embeddings — against its [`ResourceQuota`]. The store counts usage in the same transaction as
//! every save and delete, and refuses a save that would go past the caller's quota.

use super::StoreError;
use crate::domain::ResourceQuota;

/// What a resource keeps now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceUsage {
    /// Threads.
    pub threads: u64,
    /// Stored messages.
    pub messages: u64,
    /// Bytes of stored messages and their embeddings.
    pub bytes: u64,
}

impl ResourceUsage {
    /// As stored: three big-endian u64s.
    pub(super) fn encode(&self) -> [u8; 24] {
        let mut bytes = [0; 24];
        bytes[..8].copy_from_slice(&self.threads.to_be_bytes());
        bytes[8..16].copy_from_slice(&self.messages.to_be_bytes());
        bytes[16..].copy_from_slice(&self.bytes.to_be_bytes());
        bytes
    }

    /// From [`ResourceUsage::encode`]; zero for anything else (a resource never counted).
    pub(super) fn decode(bytes: &[u8]) -> ResourceUsage {
        let word = |at: usize| {
            bytes.get(at..at + 8).and_then(|word| word.try_into().ok()).map_or(0, u64::from_be_bytes)
        };
        ResourceUsage { threads: word(0), messages: word(8), bytes: word(16) }
    }

    /// This usage with `other` added.
    pub(super) fn plus(self, other: ResourceUsage) -> ResourceUsage {
        ResourceUsage {
            threads: self.threads.saturating_add(other.threads),
            messages: self.messages.saturating_add(other.messages),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }

    /// This usage with `other` taken away.
    pub(super) fn minus(self, other: ResourceUsage) -> ResourceUsage {
        ResourceUsage {
            threads: self.threads.saturating_sub(other.threads),
            messages: self.messages.saturating_sub(other.messages),
            bytes: self.bytes.saturating_sub(other.bytes),
        }
    }
}

/// `Ok` when `quota` lets `resource_id` grow from `before` to `after`; a usage may always shrink
/// or stay (a resend of stored messages adds nothing).
pub fn check_quota(
    quota: &ResourceQuota,
    resource_id: &str,
    before: ResourceUsage,
    after: ResourceUsage,
) -> Result<(), StoreError> {
    let exceeded = |what: &'static str, setting: &'static str, used: u64, limit: u64| {
        StoreError::QuotaExceeded { resource_id: resource_id.to_owned(), what, setting, used, limit }
    };
    if let Some(limit) = quota.threads
        && after.threads > before.threads
        && after.threads > limit
    {
        return Err(exceeded("threads", "max_resource_threads", before.threads, limit));
    }
    if let Some(limit) = quota.messages
        && after.messages > before.messages
        && after.messages > limit
    {
        return Err(exceeded("messages", "max_resource_messages", before.messages, limit));
    }
    if let Some(limit) = quota.bytes
        && after.bytes > before.bytes
        && after.bytes > limit
    {
        return Err(exceeded("bytes of messages", "max_resource_mb", before.bytes, limit));
    }
    Ok(())
}
