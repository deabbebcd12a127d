//! The server under test in a process of its own: `agentwire serve` on a config the bench writes
//! and a data directory, so that what the bench reads off it — CPU time, resident memory — is
//! the server's alone, not that of the clients, floors and fake provider in the bench's process.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a stopping server may take to finish its runs and flush its store before it is
/// killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A running `agentwire serve`; dropping it stops the server (SIGTERM, then SIGKILL after
/// [`STOP_GRACE`]) and deletes its temporary files.
#[derive(Debug)]
pub(super) struct ServerProcess {
    process: Child,
    address: String,
    /// Its config and its log (stderr), read back when it fails to start.
    _files: tempfile::TempDir,
}

/// What a server process is started with.
#[derive(Debug)]
pub(super) struct Launch<'a> {
    /// The `agentwire` binary.
    pub(super) binary: &'a Path,
    /// Its config (an `agentwire.toml`); none serves the default `echo` agent.
    pub(super) config: Option<&'a str>,
    /// Its data directory.
    pub(super) data_dir: &'a Path,
    /// Environment variables set for it (PostgreSQL's URL).
    pub(super) env: Vec<(String, String)>,
}

impl ServerProcess {
    /// Starts the server on a free loopback port and waits until it listens.
    pub(super) fn start(launch: &Launch<'_>) -> Result<ServerProcess, String> {
        let files =
            tempfile::tempdir().map_err(|error| format!("cannot make a temporary directory: {error}"))?;
        let log_path = files.path().join("server.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|error| format!("cannot make the server's log: {error}"))?;
        let mut command = Command::new(launch.binary);
        command.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(launch.data_dir);
        if let Some(config) = launch.config {
            let config_path = files.path().join("agentwire.toml");
            std::fs::write(&config_path, config)
                .map_err(|error| format!("cannot write the server's config: {error}"))?;
            command.arg("--config").arg(config_path);
        }
        let mut process = command
            .envs(launch.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|error| format!("cannot start `{} serve`: {error}", launch.binary.display()))?;
        // The server writes its address in the first line, and nothing after it on stdout.
        let mut ready = String::new();
        let read = process.stdout.take().map(|stdout| BufReader::new(stdout).read_line(&mut ready));
        let address = match (read, ready.strip_prefix("agentwire listening on ")) {
            (Some(Ok(_)), Some(address)) => address.trim().to_owned(),
            _ => {
                let _ = process.kill();
                let _ = process.wait();
                return Err(format!(
                    "`{} serve` did not start: {}",
                    launch.binary.display(),
                    log_tail(&log_path)
                ));
            }
        };
        Ok(ServerProcess { process, address, _files: files })
    }

    /// Where it listens (`127.0.0.1:port`).
    pub(super) fn address(&self) -> &str {
        &self.address
    }

    /// Its process id, to read its CPU time and memory.
    pub(super) fn pid(&self) -> u32 {
        self.process.id()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // SIGTERM lets it finish its runs and flush its store; std can only send SIGKILL.
        let asked = Command::new("kill")
            .args(["-TERM", &self.process.id().to_string()])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        let deadline = Instant::now() + STOP_GRACE;
        while asked && Instant::now() < deadline {
            match self.process.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Ok(Some(_)) => return,
                Err(_) => break,
            }
        }
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The last lines of the server's log, to say why it did not start.
fn log_tail(log_path: &Path) -> String {
    let log = std::fs::read_to_string(log_path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let tail = lines[lines.len().saturating_sub(5)..].join("\n");
    if tail.is_empty() { "it wrote nothing".to_owned() } else { tail }
}
