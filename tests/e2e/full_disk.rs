//! A full disk, for real: the binary's data directory on a small tmpfs that a filler file fills.
//! While the store cannot write, runs fail with UNAVAILABLE naming the store, health says
//! NOT_SERVING and a metric says why; no failed run is ever visible, no acknowledged one is
//! lost; once space is back, writes work again without a restart.
//!
//! Mounting needs root (CAP_SYS_ADMIN), as CI runs; run by another user, the tests say so and
//! skip.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use common::binary::Served;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// A tmpfs of `size` mounted on a fresh directory; unmounted when dropped.
struct Tmpfs {
    _dir: tempfile::TempDir,
    mount: PathBuf,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("disk");
        std::fs::create_dir(&mount).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mount)
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            use std::os::unix::fs::MetadataExt;
            let root = std::fs::metadata("/proc/self").is_ok_and(|process| process.uid() == 0);
            assert!(!root, "as root, a tmpfs must mount (the full-disk test needs CAP_SYS_ADMIN)");
            eprintln!("full_disk: not root, so no tmpfs to fill: skipped (CI runs it as root)");
            return None;
        }
        Some(Tmpfs { _dir: dir, mount })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}

/// Writes `path` until the disk is full.
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).unwrap();
    let block = vec![0xa5u8; 64 * 1024];
    while file.write_all(&block).and_then(|()| file.sync_all()).is_ok() {}
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn run(text: &str) -> pb::RunRequest {
    pb::RunRequest {
        agent_id: "disk".into(),
        text: text.into(),
        thread_id: "disk-thread".into(),
        resource_id: "disk-user".into(),
        ..Default::default()
    }
}

async fn health(channel: tonic::transport::Channel, service: &str) -> ServingStatus {
    let mut client = HealthClient::new(channel);
    client.check(HealthCheckRequest { service: service.to_owned() }).await.unwrap().into_inner().status()
}

/// Waits (20 s at most) until `service`'s health reads `wanted`.
async fn await_health(channel: &tonic::transport::Channel, service: &str, wanted: ServingStatus) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = health(channel.clone(), service).await;
        if status == wanted {
            return;
        }
        assert!(Instant::now() < deadline, "{service}'s health is {status:?}, not {wanted:?}, after 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (20 s at most) until `/metrics` shows the store in `state` with `value`.
async fn await_metric(metrics_port: u16, state: &str, value: f64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let scraped = writable_metric(metrics_port);
        if scraped == (state.to_owned(), value) {
            return;
        }
        assert!(Instant::now() < deadline, "the store's metric reads {scraped:?}, not ({state}, {value})");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The store's writability in a `/metrics` scrape: its `state` label and its value.
fn writable_metric(metrics_port: u16) -> (String, f64) {
    use std::io::Read;
    let mut connection = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).unwrap();
    connection.write_all(b"GET /metrics HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    connection.read_to_string(&mut text).unwrap();
    // `agentwire_store_writable{replica="…",state="…"} 1`: the binary labels every series with its replica.
    let line = text
        .lines()
        .find(|line| line.starts_with("agentwire_store_writable{"))
        .unwrap_or_else(|| panic!("no agentwire_store_writable in\n{text}"));
    let (labels, value) = line.rsplit_once("} ").unwrap();
    let state = labels.split_once("state=\"").unwrap().1.trim_end_matches('"');
    (state.to_owned(), value.parse().unwrap())
}

/// The texts stored in the test thread, oldest first.
async fn try_stored(channel: tonic::transport::Channel) -> Result<Vec<String>, tonic::Status> {
    let mut memory = MemoryServiceClient::new(channel);
    let request = pb::ListMessagesRequest {
        thread_id: "disk-thread".into(),
        resource_id: "disk-user".into(),
        page_size: 1000,
        ..Default::default()
    };
    let page = memory.list_messages(request).await?.into_inner();
    Ok(page.messages.iter().map(common::message_text).collect())
}

async fn stored(channel: tonic::transport::Channel) -> Vec<String> {
    try_stored(channel).await.unwrap()
}

/// Runs until one fails (in its response or with a status); the texts of those that finished,
/// and the failure's message.
async fn run_until_failure(
    client: &mut AgentServiceClient<tonic::transport::Channel>,
) -> (Vec<String>, String) {
    let mut finished = Vec::new();
    for index in 0..2000 {
        let text = format!("run {index} {}", "x".repeat(2000));
        match client.generate(run(&text)).await {
            Ok(response) => match response.into_inner().error {
                None => finished.push(text),
                Some(error) => return (finished, error.message),
            },
            Err(status) => return (finished, status.message().to_owned()),
        }
    }
    panic!("2000 runs of 2 KB fitted on a full disk");
}

/// With a reserve (`[storage] min_free_mb`), a full disk refuses writes before they reach the
/// database: runs fail naming the store and then get UNAVAILABLE, health says NOT_SERVING for
/// the services that write and `agentwire_store_writable{state="disk_low"}` 0; reads keep
/// working and show exactly the finished runs; once space is back, everything recovers without
/// a restart, and a restart finds every acknowledged run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_and_they_resume_when_space_is_back() {
    let min_free_mb = 1;
    let Some(disk) = Tmpfs::mount("24m") else { return };
    let data_dir = disk.mount.join("data");
    std::fs::create_dir(&data_dir).unwrap();
    let metrics_port = free_port();
    let config_path = disk._dir.path().join("agentwire.toml");
    std::fs::write(
        &config_path,
        format!(
            "[storage]\nmin_free_mb = {min_free_mb}\n\n[metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n\n\
             [[agents]]\nid = \"disk\"\nmodel = \"mock/echo\"\nmemory = {{ last_messages = 2 }}\n"
        ),
    )
    .unwrap();
    let config = config_path.to_str().unwrap();
    let server = Served::start_in(&data_dir, &["--config", config]);
    let channel = server.channel().await;
    let mut client = AgentServiceClient::new(channel.clone());
    let first = client.generate(run("before the disk filled")).await.expect("a run on an empty disk");
    assert_eq!(first.into_inner().error, None);
    assert_eq!(writable_metric(metrics_port), ("writable".to_owned(), 1.0));

    let filler = disk.mount.join("filler");
    fill(&filler);
    let (mut finished, failure) = run_until_failure(&mut client).await;
    finished.insert(0, "before the disk filled".to_owned());
    assert!(failure.contains("store"), "the failure names the store: {failure}");
    let refused = client.generate(run("while full")).await.expect_err("refused while the disk is full");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("store"), "{}", refused.message());
    // Health follows the store's state on a task of its own: wait for it, never read it once.
    for service in ["agentwire.v1.AgentService", "agentwire.v1.MemoryService"] {
        await_health(&channel, service, ServingStatus::NotServing).await;
    }
    assert_eq!(health(channel.clone(), "").await, ServingStatus::Serving, "the server itself is up");
    await_metric(metrics_port, "disk_low", 0.0).await;

    // Exactly the finished runs are visible, whole: a question and its echo each.
    let mut expected: Vec<String> =
        finished.iter().flat_map(|text| [text.clone(), format!("echo: {text}")]).collect();
    // On a low disk reads work.
    assert_eq!(stored(channel.clone()).await, expected, "exactly the finished runs are visible");

    std::fs::remove_file(&filler).unwrap();
    for service in ["agentwire.v1.AgentService", "agentwire.v1.MemoryService"] {
        await_health(&channel, service, ServingStatus::Serving).await;
    }
    await_metric(metrics_port, "writable", 1.0).await;
    assert_eq!(stored(channel.clone()).await, expected, "the reopened store holds the finished runs");
    let after = client.generate(run("after space came back")).await.expect("writes resume without a restart");
    assert_eq!(after.into_inner().error, None);
    expected.extend(["after space came back".to_owned(), "echo: after space came back".to_owned()]);
    assert_eq!(stored(channel).await, expected);

    // And a kill -9 and a restart find the same.
    drop(server);
    let server = Served::start_in(&data_dir, &["--config", config]);
    assert_eq!(stored(server.channel().await).await, expected, "what was acknowledged survives a restart");
}

/// Without a reserve sled would run into "No space left on device" mid-write, which it does not
/// survive reliably: the binary refuses `min_free_mb = 0` at start, saying why.
#[test]
fn a_store_without_a_reserve_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentwire.toml");
    std::fs::write(&config, "[storage]\nmin_free_mb = 0\n").unwrap();
    let output = Command::new(common::binary::BINARY)
        .args(["serve", "--listen", "127.0.0.1:0", "--config", config.to_str().unwrap(), "--data-dir"])
        .arg(dir.path().join("data"))
        .output()
        .expect("the binary runs");
    assert!(!output.status.success(), "it must not serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("storage.min_free_mb must be at least 1"), "{stderr}");
}
