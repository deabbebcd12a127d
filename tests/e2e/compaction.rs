//! `agentwire compact` on the real binary's data directory: overwritten and deleted data is
//! given back to the disk, the live data is all there after a restart, and a store in use is
//! left alone with a clear error.

use crate::common;

use std::process::Command;

use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use agentwire::storage::directory_bytes;
use common::binary::{BINARY, Served};

const CONFIG: &str = r##"
[storage]
max_working_memory_bytes = 100000

[[agents]]
id = "echo"
model = "mock/echo"
memory = { last_messages = 4 }
"##;

fn compact(data_dir: &std::path::Path) -> std::process::Output {
    Command::new(BINARY).arg("compact").arg("--data-dir").arg(data_dir).output().unwrap()
}

fn scope() -> Option<pb::WorkingMemoryScope> {
    Some(pb::WorkingMemoryScope { scope: Some(pb::working_memory_scope::Scope::ResourceId("user".into())) })
}

/// A store grown by overwrites and deletes shrinks to its live data; what is live survives
/// compaction and a restart; compacting a store the server holds open fails and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_gives_dead_data_back_and_keeps_the_live() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentwire.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let data_dir = dir.path().join("data");
    let config = config.to_str().unwrap();
    let mut server = Served::start_in(&data_dir, &["--config", config]);
    let channel = server.channel().await;
    let mut agents = AgentServiceClient::new(channel.clone());
    let mut memory = MemoryServiceClient::new(channel);
    for thread in 0..20 {
        for run in 0..5 {
            let request = pb::RunRequest {
                agent_id: "echo".into(),
                text: format!("thread {thread} run {run} {}", "words ".repeat(500)),
                thread_id: format!("t{thread}"),
                resource_id: "user".into(),
                ..Default::default()
            };
            agents.generate(request).await.unwrap();
        }
    }
    for version in 0..150 {
        let content = format!("# Notes v{version}\n{}", "- a fact worth keeping\n".repeat(4000));
        let update = pb::UpdateWorkingMemoryRequest {
            scope: scope(),
            content,
            expected_version: None,
            ..Default::default()
        };
        memory.update_working_memory(update).await.unwrap();
    }
    for thread in 1..20 {
        let delete = pb::DeleteThreadRequest { thread_id: format!("t{thread}"), resource_id: "user".into() };
        memory.delete_thread(delete).await.unwrap();
    }

    let refused = compact(&data_dir);
    assert!(!refused.status.success(), "a store in use is not compacted");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("stop the server first"), "{refused:?}");

    assert!(server.terminate().success());
    let before = directory_bytes(&data_dir.join("store"));
    let compacted = compact(&data_dir);
    assert!(compacted.status.success(), "{compacted:?}");
    let after = directory_bytes(&data_dir.join("store"));
    eprintln!("{}", String::from_utf8_lossy(&compacted.stdout));
    assert!(after * 4 < before, "the dead data went back to the disk: {before} → {after} bytes");

    let server = Served::start_in(&data_dir, &["--config", config]);
    let mut memory = MemoryServiceClient::new(server.channel().await);
    let list = pb::ListMessagesRequest {
        thread_id: "t0".into(),
        resource_id: "user".into(),
        page_size: 100,
        ..Default::default()
    };
    let kept = memory.list_messages(list).await.unwrap().into_inner().messages;
    assert_eq!(kept.len(), 10, "the live thread is whole");
    assert!(common::message_text(&kept[0]).starts_with("thread 0 run 0 "));
    let notes = memory
        .get_working_memory(pb::GetWorkingMemoryRequest { scope: scope(), ..Default::default() })
        .await
        .unwrap();
    let notes = notes.into_inner();
    assert!(notes.content.starts_with("# Notes v149\n"), "the last working memory is kept");
    assert_eq!(notes.version, 150);
    let gone = pb::GetThreadRequest { thread_id: "t5".into(), resource_id: "user".into() };
    assert_eq!(memory.get_thread(gone).await.unwrap_err().code(), tonic::Code::NotFound);
}
