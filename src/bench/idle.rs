//! The idle server's memory: `agentwire serve` started in a process of its own on an empty data
//! directory, its resident memory read a second after it is ready — the server alone, without
//! the clients, floors and fake provider that share the bench's process with its server.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long after it is ready the idle server's memory is read.
const SETTLE: Duration = Duration::from_secs(1);

/// The resident memory, in bytes, of `binary serve` on an empty data directory, idle.
pub(super) fn idle_server_rss(binary: &Path) -> Result<u64, String> {
    let data_dir = tempfile::tempdir().map_err(|error| format!("cannot make a data directory: {error}"))?;
    let mut server = Command::new(binary)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot start `{} serve`: {error}", binary.display()))?;
    let mut ready = String::new();
    let mut stdout = server.stdout.take().map(BufReader::new);
    let read = stdout.as_mut().map(|stdout| stdout.read_line(&mut ready));
    let rss = match read {
        Some(Ok(_)) if ready.starts_with("agentwire listening on") => {
            std::thread::sleep(SETTLE);
            super::usage::resident_of(server.id()).ok_or_else(|| "cannot read its memory".to_owned())
        }
        _ => Err(format!("`{} serve` did not start: {ready:?}", binary.display())),
    };
    let _ = server.kill();
    let _ = server.wait();
    rss
}
