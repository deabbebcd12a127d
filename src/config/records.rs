//! The `[records]` table: how long the records of runs are kept.

use serde::Deserialize;

/// `[records]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordsConfig {
    /// Whether runs leave records at all. Default true.
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    /// Records of runs older than this many days are deleted; 0 keeps them by age forever.
    /// Default 30.
    #[serde(default = "default_keep_days")]
    pub keep_days: u64,
    /// Beyond this many records the oldest are deleted; 0: no limit. Default 100,000.
    #[serde(default = "default_max_runs")]
    pub max_runs: u64,
}

impl Default for RecordsConfig {
    fn default() -> RecordsConfig {
        RecordsConfig {
            enabled: default_enabled(),
            keep_days: default_keep_days(),
            max_runs: default_max_runs(),
        }
    }
}

fn default_enabled() -> bool {
    true
}

fn default_keep_days() -> u64 {
    30
}

fn default_max_runs() -> u64 {
    100_000
}
