//! `[tools.<name>]`: tools executed by remote instances, which agents may offer.

use serde::Deserialize;

/// A `[tools.<name>]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteToolConfig {
    /// Only `remote` for now.
    pub kind: String,
    /// The processor id its instances connect as (default: the tool's name).
    #[serde(default)]
    pub server: Option<String>,
    /// Per call. Default 10 s.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}
