//! The `agentwire` binary as a process: `serve` started on an ephemeral port with a data
//! directory of its own, its ready line read, its log lines kept.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

pub const BINARY: &str = env!("CARGO_BIN_EXE_agentwire");

/// A running `agentwire serve`; killed when dropped.
pub struct Served {
    pub child: Child,
    /// `host:port` from the ready line.
    pub addr: String,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    _data_dir: Option<tempfile::TempDir>,
}

impl Served {
    /// `agentwire serve --listen 127.0.0.1:0 --data-dir <temp> <args>`.
    pub fn start(args: &[&str]) -> Served {
        Served::start_with(args, &[])
    }

    /// [`Served::start`] with environment variables.
    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> Served {
        let data_dir = tempfile::tempdir().unwrap();
        let data = data_dir.path().to_owned();
        Served::spawn(&data, args, env, Some(data_dir))
    }

    /// [`Served::start`] with the data directory `data_dir`, which outlives the server.
    pub fn start_in(data_dir: &std::path::Path, args: &[&str]) -> Served {
        Served::spawn(data_dir, args, &[], None)
    }

    fn spawn(
        data_dir: &std::path::Path,
        args: &[&str],
        env: &[(&str, &str)],
        owned: Option<tempfile::TempDir>,
    ) -> Served {
        let mut child = Command::new(BINARY)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let stderr: Arc<Mutex<String>> = Arc::default();
        let mut pipe = child.stderr.take().unwrap();
        let kept = Arc::clone(&stderr);
        let stderr_reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(read @ 1..) = pipe.read(&mut buffer) {
                kept.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..read]));
            }
        });
        let mut first_line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first_line).unwrap();
        let Some(addr) = first_line.trim().strip_prefix("agentwire listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no ready line; stderr: {}", stderr.lock().unwrap());
        };
        Served { addr: addr.to_owned(), child, stderr, stderr_reader: Some(stderr_reader), _data_dir: owned }
    }

    /// A channel to the server.
    pub async fn channel(&self) -> tonic::transport::Channel {
        let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr)).unwrap();
        endpoint.connect().await.expect("the server accepts connections")
    }

    /// What the server logged so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends SIGTERM and waits for the exit (and its last log lines).
    pub fn terminate(&mut self) -> ExitStatus {
        let killed = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(killed.success());
        let status = self.child.wait().unwrap();
        if let Some(reader) = self.stderr_reader.take() {
            reader.join().unwrap();
        }
        status
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
