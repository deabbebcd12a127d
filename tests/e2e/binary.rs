//! The `agentwire` binary as a newcomer uses it: `serve` prints its address, answers, and stops
//! cleanly on SIGTERM; `run` streams an answer and flags a tripwire; a bad config stops start-up.

use crate::common;

use std::process::Command;

use common::binary::{BINARY, Served};

fn example_config() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/examples/agentwire.toml").to_owned()
}

/// `serve` prints exactly the ready line with its port, and `agents` and `run` talk to it.
#[test]
fn serve_then_run_and_list() {
    let served = Served::start(&["--config", &example_config(), "--console", "127.0.0.1:0"]);
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

/// `agentwire runs` lists a blocked run with the processor and reason that ended it, and
/// `agentwire runs show` prints its timeline: the hook that aborted, in which step, and why —
/// and, for an agent that keeps content, what the client got.
#[test]
fn runs_lists_and_shows_what_blocked_a_run() {
    let served = Served::start(&["--config", &example_config(), "--console", "127.0.0.1:0"]);
    let blocked = Command::new(BINARY)
        .args(["run", "--agent", "guarded", "--addr", &served.addr, "my secret"])
        .output()
        .unwrap();
    assert_eq!(blocked.status.code(), Some(2));
    let runs = |args: &[&str]| {
        let output =
            Command::new(BINARY).arg("runs").args(args).args(["--addr", &served.addr]).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let listed = loop {
        let listed = runs(&["--outcome", "tripwire"]);
        if listed.lines().count() > 1 || std::time::Instant::now() > deadline {
            break listed;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let line = listed.lines().nth(1).unwrap_or_else(|| panic!("a run listed: {listed}"));
    assert!(line.contains("guarded") && line.contains("tripwire") && line.contains("no-secrets"), "{line}");
    let run_id = line.split_whitespace().nth(2).unwrap();
    let shown = runs(&["show", run_id]);
    assert!(shown.contains(&format!("run       {run_id}")), "{shown}");
    let abort = shown.lines().find(|line| line.contains(" abort ")).unwrap_or_else(|| panic!("{shown}"));
    assert!(abort.contains("no-secrets") && abort.contains("processInput"), "{abort}");
    assert!(shown.contains("the client got"), "the example's guarded agent keeps content: {shown}");
}

/// SIGTERM stops the server gracefully with exit code 0.
#[test]
fn sigterm_stops_the_server_cleanly() {
    let mut served = Served::start(&[]);
    let status = served.terminate();
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

/// The console beyond loopback needs API keys and TLS (or `allow_plaintext` behind a proxy); on
/// loopback it serves, announced on the line after the ready line.
#[test]
fn the_console_is_served_beyond_loopback_only_with_keys_and_tls() {
    let data_dir = tempfile::tempdir().unwrap();
    let refused = |config: &str| {
        let path = data_dir.path().join("console.toml");
        std::fs::write(&path, config).unwrap();
        let output = Command::new(BINARY)
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&path)
            .arg("--data-dir")
            .arg(data_dir.path())
            .output()
            .unwrap();
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let keys = "[[auth.keys]]\nname = \"ops\"\nkey = \"k\"\nresources = [\"*\"]\nadmin = true\n";
    let open = refused("[console]\nlisten = \"0.0.0.0:0\"\n");
    assert!(open.contains("refusing to serve the console on 0.0.0.0:0 without API keys"), "{open}");
    let plaintext = refused(&format!("[console]\nlisten = \"0.0.0.0:0\"\n{keys}"));
    assert!(plaintext.contains("without TLS") && plaintext.contains("allow_plaintext"), "{plaintext}");

    let path = data_dir.path().join("loopback.toml");
    std::fs::write(&path, "[console]\nlisten = \"127.0.0.1:0\"\n").unwrap();
    let mut server = Command::new(BINARY)
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .arg("--data-dir")
        .arg(data_dir.path().join("data"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(server.stdout.take().unwrap()));
    let ready = lines.next().unwrap().unwrap();
    assert!(ready.starts_with("agentwire listening on "), "{ready}");
    let console = lines.next().unwrap().unwrap();
    assert!(console.starts_with("agentwire console on http://127.0.0.1:"), "{console}");
    server.kill().unwrap();
    server.wait().unwrap();
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
    let served =
        Served::start_with(&["--config", config.to_str().unwrap()], &[("TEST_OPS_KEY", "ops-secret")]);
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
