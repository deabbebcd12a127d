//! What one resource may keep in memory — threads, messages, and the bytes of its messages with
//! their embeddings — and how many resources one API key may create. Set in `[storage]`,
//! overridden per API key.

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

/// How many resources one API key may create: each resource is counted once, as the key's that
/// first wrote to it, until it is deleted; a write that would create one more is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceAllowance {
    /// The key, by name.
    pub key_name: String,
    /// The resources it may have created at once.
    pub max_resources: u64,
}
