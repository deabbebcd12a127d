//! The log lines of the server running in a test: a `tracing` subscriber for the whole test
//! binary, writing into memory.

use std::io::Write;
use std::sync::{Arc, LazyLock, Mutex};

/// Every log line written since the test binary started.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// The lines that contain `needle`.
    pub fn lines_with(&self, needle: &str) -> Vec<String> {
        let bytes = self.0.lock().unwrap();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

impl Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

static LOGS: LazyLock<Logs> = LazyLock::new(|| {
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).init();
    logs
});

/// Starts capturing (once per test binary) and returns the captured lines.
pub fn capture() -> Logs {
    LOGS.clone()
}
