//! The idle server's memory: `agentwire serve` started in a process of its own on an empty data
//! directory, its resident memory read a second after it is ready.

use std::path::Path;
use std::time::Duration;

use super::child::{Launch, ServerProcess};

/// How long after it is ready the idle server's memory is read.
const SETTLE: Duration = Duration::from_secs(1);

/// The resident memory, in bytes, of `binary serve` on an empty data directory, idle.
pub(super) fn idle_server_rss(binary: &Path) -> Result<u64, String> {
    let data_dir = tempfile::tempdir().map_err(|error| format!("cannot make a data directory: {error}"))?;
    let server =
        ServerProcess::start(&Launch { binary, config: None, data_dir: data_dir.path(), env: Vec::new() })?;
    std::thread::sleep(SETTLE);
    super::usage::resident_of(server.pid()).ok_or_else(|| "cannot read its memory".to_owned())
}
