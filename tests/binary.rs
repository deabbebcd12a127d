//! The `agentwire` binary as a newcomer uses it: `serve` prints its address, answers, and stops
//! cleanly on SIGTERM; `run` streams an answer and flags a tripwire; a bad config stops start-up.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const BINARY: &str = env!("CARGO_BIN_EXE_agentwire");

struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(args: &[&str]) -> Served {
    let data_dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BINARY)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir.path())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    let mut first_line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first_line).unwrap();
    let addr = first_line.trim().strip_prefix("agentwire listening on ").expect("the ready line").to_owned();
    Served { child, addr }
}

fn example_config() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/examples/agentwire.toml").to_owned()
}

/// `serve` prints exactly the ready line with its port, and `agents` and `run` talk to it.
#[test]
fn serve_then_run_and_list() {
    let served = serve(&["--config", &example_config()]);
    let listed = Command::new(BINARY).args(["agents", "--addr", &served.addr]).output().unwrap();
    assert!(listed.status.success());
    assert!(String::from_utf8_lossy(&listed.stdout).contains("guarded"));

    let answered = Command::new(BINARY)
        .args(["run", "--agent", "echo", "--addr", &served.addr, "hi there"])
        .output()
        .unwrap();
    assert!(answered.status.success());
    assert_eq!(String::from_utf8_lossy(&answered.stdout).trim(), "echo: hi there");

    let blocked = Command::new(BINARY)
        .args(["run", "--agent", "guarded", "--addr", &served.addr, "my secret"])
        .output()
        .unwrap();
    assert_eq!(blocked.status.code(), Some(2), "a tripwire exits with 2");
    let stderr = String::from_utf8_lossy(&blocked.stderr);
    assert!(stderr.contains("TRIPWIRE") && stderr.contains("no-secrets"), "{stderr}");
}

/// SIGTERM stops the server gracefully with exit code 0.
#[test]
fn sigterm_stops_the_server_cleanly() {
    let mut served = serve(&[]);
    let killed = Command::new("kill").args(["-TERM", &served.child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = served.child.wait().unwrap();
    assert!(status.success(), "exit status {status:?}");
}

/// A config with an unknown key stops start-up with a message naming it.
#[test]
fn bad_config_stops_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentwire.toml");
    std::fs::write(&path, "[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\nspeed = 3\n").unwrap();
    let output = Command::new(BINARY)
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("speed") && stderr.contains("line 4"), "{stderr}");
    assert!(output.stdout.is_empty(), "no ready line");
}

/// Without API keys the server will not listen beyond loopback, unless told to; with keys, `run`
/// and `agents` pass `--key` (or `AGENTWIRE_API_KEY`).
#[test]
fn keys_guard_what_is_served_beyond_loopback() {
    let data_dir = tempfile::tempdir().unwrap();
    let refused = Command::new(BINARY)
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(data_dir.path())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("refusing to serve 0.0.0.0:0 without API keys")
    );

    let config = data_dir.path().join("keyed.toml");
    std::fs::write(
        &config,
        "[[auth.keys]]\nname = \"ops\"\nkey_env = \"TEST_OPS_KEY\"\nresources = [\"*\"]\n\n\
         [[agents]]\nid = \"echo\"\nmodel = \"mock/echo\"\n",
    )
    .unwrap();
    let mut child = Command::new(BINARY)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .env("TEST_OPS_KEY", "ops-secret")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first_line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first_line).unwrap();
    let served = Served {
        addr: first_line.trim().strip_prefix("agentwire listening on ").expect("the ready line").to_owned(),
        child,
    };
    let without = Command::new(BINARY)
        .args(["agents", "--addr", &served.addr])
        .env_remove("AGENTWIRE_API_KEY")
        .output()
        .unwrap();
    assert!(!without.status.success());
    assert!(String::from_utf8_lossy(&without.stderr).contains("API key is required"));
    let with = Command::new(BINARY)
        .args(["run", "--agent", "echo", "--addr", &served.addr, "hi"])
        .env("AGENTWIRE_API_KEY", "ops-secret")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&with.stdout).trim(), "echo: hi");
}
