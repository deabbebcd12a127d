//! How large one stored value may be: a thread's title and metadata, a working-memory document.
//! Each is checked where it enters (the memory API, the `update_working_memory` tool), so one
//! tenant cannot grow the store by writing huge values as often as it likes.

/// The size limits of stored values, in bytes (`[storage]` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLimits {
    /// A thread's title.
    pub title: usize,
    /// A thread's metadata, as JSON.
    pub metadata: usize,
    /// A working-memory document (markdown, or JSON under a schema).
    pub working_memory: usize,
}

impl Default for FieldLimits {
    fn default() -> FieldLimits {
        FieldLimits { title: 1024, metadata: 16 * 1024, working_memory: 64 * 1024 }
    }
}

/// A value over its limit: the field, its size, and the setting that limits it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {size} bytes exceeds the limit storage.{setting} = {limit}")]
pub struct TooLarge {
    /// The request field, e.g. `title`.
    pub field: String,
    /// The value's size in bytes.
    pub size: usize,
    /// The `[storage]` setting.
    pub setting: &'static str,
    /// The limit in bytes.
    pub limit: usize,
}

impl FieldLimits {
    /// `Ok` when a title fits.
    pub fn title(&self, field: &str, title: &str) -> Result<(), TooLarge> {
        within(field, title.len(), "max_title_bytes", self.title)
    }

    /// `Ok` when metadata, as JSON, fits.
    pub fn metadata(
        &self,
        field: &str,
        metadata: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), TooLarge> {
        let size = serde_json::to_vec(metadata).map_or(usize::MAX, |json| json.len());
        within(field, size, "max_metadata_bytes", self.metadata)
    }

    /// `Ok` when a working-memory document fits.
    pub fn working_memory(&self, field: &str, content: &str) -> Result<(), TooLarge> {
        within(field, content.len(), "max_working_memory_bytes", self.working_memory)
    }
}

fn within(field: &str, size: usize, setting: &'static str, limit: usize) -> Result<(), TooLarge> {
    if size > limit {
        return Err(TooLarge { field: field.to_owned(), size, setting, limit });
    }
    Ok(())
}
