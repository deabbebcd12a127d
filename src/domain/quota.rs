//! What one resource may keep in memory: threads, messages, and the bytes of its messages with
//! their embeddings. Set in `[storage]`, overridden per API key.

/// A resource's limits; `None`: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceQuota {
    /// Threads.
    pub threads: Option<u64>,
    /// Stored messages.
    pub messages: Option<u64>,
    /// Bytes of stored messages and their embeddings.
    pub bytes: Option<u64>,
}

impl ResourceQuota {
    /// No limits.
    pub const UNLIMITED: ResourceQuota = ResourceQuota { threads: None, messages: None, bytes: None };
}
