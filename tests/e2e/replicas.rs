//! Several replicas of the real binary on one PostgreSQL: any replica serves any run of any
//! thread, a thread's history continues across them, a remote guardrail connected to each
//! guards runs on each, and a replica killed with SIGKILL under load loses no finished run
//! while the others keep serving.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::storage::{Direction, Store};

use crate::common::binary::Served;
use crate::common::{inspected, postgres, remote};

const CONFIG: &str = r#"
[[agents]]
id = "inspector"
model = "mock/inspect"
memory = { last_messages = 20 }

[[agents]]
id = "echo"
model = "mock/echo"
memory = { last_messages = 2 }

[[agents]]
id = "guarded"
model = "mock/echo"
memory = { last_messages = 2 }
input_processors = [{ remote = "word-guard", timeout_ms = 2000 }]

[storage]
backend = "postgres"

[storage.postgres]
url_env = "AGENTWIRE_REPLICA_TEST_URL"
pool_size = 8
"#;

/// Three replicas on a fresh database (none when there is no test PostgreSQL).
async fn replicas() -> Option<(String, tempfile::TempDir, Vec<Served>)> {
    let url = postgres::fresh_database().await?;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentwire.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let config = config.to_str().unwrap().to_owned();
    let started = (0..3)
        .map(|_| Served::start_with(&["--config", &config], &[("AGENTWIRE_REPLICA_TEST_URL", &url)]))
        .collect();
    Some((url, dir, started))
}

fn run(agent: &str, text: &str, thread: &str) -> pb::RunRequest {
    pb::RunRequest {
        agent_id: agent.into(),
        text: text.into(),
        thread_id: thread.into(),
        resource_id: "team".into(),
        ..Default::default()
    }
}

/// Runs of one thread spread over three replicas: each sees the whole history, whichever
/// replica wrote it, and every replica lists the same messages in the same order.
#[tokio::test]
async fn a_thread_continues_across_replicas() {
    let Some((_url, _dir, replicas)) = replicas().await else { return };
    let mut clients = Vec::new();
    for replica in &replicas {
        clients.push(AgentServiceClient::new(replica.channel().await));
    }
    for turn in 0..6 {
        let client = &mut clients[turn % 3];
        let answer =
            client.generate(run("inspector", &format!("turn {turn}"), "shared")).await.unwrap().into_inner();
        let prompt = inspected(&answer.text);
        let users: Vec<String> = prompt["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|message| message["role"] == "user")
            .map(|message| message["text"].as_str().unwrap().to_owned())
            .collect();
        let expected: Vec<String> = (0..=turn).map(|earlier| format!("turn {earlier}")).collect();
        assert_eq!(users, expected, "turn {turn} on replica {}: the history of every replica", turn % 3);
    }
    let mut listed = Vec::new();
    for replica in &replicas {
        let mut memory = pb::memory_service_client::MemoryServiceClient::new(replica.channel().await);
        let request = pb::ListMessagesRequest {
            thread_id: "shared".into(),
            resource_id: "team".into(),
            ..Default::default()
        };
        let page = memory.list_messages(request).await.unwrap().into_inner();
        listed.push(page.messages.iter().map(|message| message.id.clone()).collect::<Vec<_>>());
    }
    assert_eq!(listed[0].len(), 12);
    assert!(listed.iter().all(|ids| *ids == listed[0]), "one order on every replica");
}

/// A remote guardrail connected to every replica guards the runs of each: a blocked word trips
/// the run on whichever replica serves it, and nothing of it is saved.
#[tokio::test]
async fn a_remote_guardrail_guards_every_replica() {
    let Some((url, _dir, replicas)) = replicas().await else { return };
    let mut instances = Vec::new();
    for replica in &replicas {
        let answer: remote::Answer = Arc::new(|call| {
            if remote::call_text(call).contains("forbidden") {
                remote::abort("a forbidden word")
            } else {
                remote::cont()
            }
        });
        instances.push(
            remote::serve(replica.channel().await, "word-guard", &[pb::Hook::ProcessInput], answer).await,
        );
    }
    for (index, replica) in replicas.iter().enumerate() {
        let mut client = AgentServiceClient::new(replica.channel().await);
        let thread = format!("guarded-{index}");
        let blocked = client.generate(run("guarded", "say forbidden", &thread)).await.unwrap().into_inner();
        assert_eq!(blocked.tripwire.expect("a tripwire").reason, "a forbidden word", "replica {index}");
        let passed = client.generate(run("guarded", "say hello", &thread)).await.unwrap().into_inner();
        assert_eq!(passed.text, "echo: say hello", "replica {index}");
    }
    let store = postgres::connect(&url).await;
    for index in 0..3 {
        let stored = store.last_messages("team", &format!("guarded-{index}"), 10).await.unwrap();
        let texts: Vec<String> = stored.iter().map(|stored| stored.message.text()).collect();
        assert_eq!(texts, ["say hello", "echo: say hello"], "replica {index}: nothing of the tripped run");
    }
}

/// Streams runs of `thread`, starting on replica `first` and moving to the next replica when
/// one fails; records each run whose `finish` arrived, and on which replica, until `stop`.
async fn client_loop(
    addresses: Vec<String>,
    first: usize,
    thread: String,
    finished: Arc<Mutex<Vec<(usize, String, String)>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut replica = first;
    let mut run_index = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let text = format!("{thread} run {run_index}");
        let endpoint =
            tonic::transport::Endpoint::from_shared(format!("http://{}", addresses[replica])).unwrap();
        let outcome = async {
            let mut client = AgentServiceClient::new(endpoint.connect().await.ok()?);
            let mut stream = client.stream(run("guarded", &text, &thread)).await.ok()?.into_inner();
            while let Some(chunk) = stream.message().await.ok()? {
                if chunk.r#type == "finish" {
                    return Some(());
                }
            }
            None
        }
        .await;
        match outcome {
            Some(()) => {
                finished.lock().unwrap().push((replica, thread.clone(), text));
                run_index += 1;
            }
            // The replica is gone (or the run failed with it): retry elsewhere.
            None => replica = (replica + 1) % addresses.len(),
        }
    }
}

/// One replica killed with SIGKILL under concurrent load of guarded runs: no run whose `finish`
/// a client received is lost, no half run is stored, and the other two keep serving the clients
/// that retry on them, their remote guardrail still connected and still called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_under_load_loses_no_finished_run() {
    let Some((url, _dir, mut replicas)) = replicas().await else { return };
    let addresses: Vec<String> = replicas.iter().map(|replica| replica.addr.clone()).collect();
    let guarded = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut instances = Vec::new();
    for replica in &replicas {
        let counted = Arc::clone(&guarded);
        let answer: remote::Answer = Arc::new(move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            remote::cont()
        });
        instances.push(
            remote::serve(replica.channel().await, "word-guard", &[pb::Hook::ProcessInput], answer).await,
        );
    }
    let finished: Arc<Mutex<Vec<(usize, String, String)>>> = Arc::default();
    let stop: Arc<std::sync::atomic::AtomicBool> = Arc::default();
    let clients: Vec<_> = (0..9)
        .map(|index| {
            tokio::spawn(client_loop(
                addresses.clone(),
                index % 3,
                format!("load-{index}"),
                Arc::clone(&finished),
                Arc::clone(&stop),
            ))
        })
        .collect();
    crate::common::eventually("runs finish on every replica", || {
        let finished = finished.lock().unwrap();
        (0..3).all(|replica| finished.iter().any(|(on, _, _)| *on == replica))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    replicas[0].child.kill().unwrap(); // SIGKILL
    replicas[0].child.wait().unwrap();
    let at_kill = finished.lock().unwrap().len();
    let guarded_at_kill = guarded.load(std::sync::atomic::Ordering::Relaxed);
    crate::common::eventually("the others keep serving", || finished.lock().unwrap().len() > at_kill + 30)
        .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }

    let store = postgres::connect(&url).await;
    let finished = finished.lock().unwrap().clone();
    for index in 0..9 {
        let thread = format!("load-{index}");
        let messages =
            store.list_messages("team", &thread, Direction::Forward, "", 100_000).await.unwrap().messages;
        assert_eq!(messages.len() % 2, 0, "{thread}: a half run is visible");
        for pair in messages.chunks(2) {
            assert_eq!(
                pair[1].message.text(),
                format!("echo: {}", pair[0].message.text()),
                "{thread}: runs whole"
            );
        }
        let stored: Vec<String> = messages.iter().map(|stored| stored.message.text()).collect();
        for (_, _, text) in finished.iter().filter(|(_, on_thread, _)| *on_thread == thread) {
            assert!(stored.contains(text), "{thread}: the finished run `{text}` was lost");
        }
    }
    let after_kill_on_others = finished.iter().skip(at_kill).filter(|(on, _, _)| *on != 0).count();
    assert!(after_kill_on_others > 0, "the other replicas served after the kill");
    let guarded_after = guarded.load(std::sync::atomic::Ordering::Relaxed) - guarded_at_kill;
    assert!(guarded_after >= 30, "the guardrail kept guarding on the others ({guarded_after} calls)");
}

/// A PostgreSQL out of space (here every message insert fails with SQLSTATE 53100, disk_full)
/// fails the run that hit it, then refuses the next runs up front with UNAVAILABLE naming it —
/// before their model and processors run — and reports the agent service NOT_SERVING; once the
/// database takes writes again, runs are saved again without a restart.
#[tokio::test]
async fn a_database_out_of_space_refuses_runs_up_front_until_it_takes_writes() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let Some((url, _dir, replicas)) = replicas().await else { return };
    let (sql, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    sql.batch_execute(
        "CREATE FUNCTION agentwire_test_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; \
         END $$; \
         CREATE TRIGGER agentwire_test_full BEFORE INSERT ON messages \
           FOR EACH ROW EXECUTE FUNCTION agentwire_test_full();",
    )
    .await
    .unwrap();
    let channel = replicas[0].channel().await;
    let mut client = AgentServiceClient::new(channel.clone());
    let failed = client.generate(run("echo", "first", "full")).await;
    let message = match failed {
        Ok(response) => response.into_inner().error.expect("the save failed").message,
        Err(status) => status.message().to_owned(),
    };
    assert!(message.contains("out of space"), "{message}");
    let refused = client.generate(run("echo", "second", "full")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("out of space"), "{}", refused.message());
    let mut health = HealthClient::new(channel);
    let check = HealthCheckRequest { service: "agentwire.v1.AgentService".into() };
    assert_eq!(health.check(check).await.unwrap().into_inner().status(), ServingStatus::NotServing);

    sql.batch_execute("DROP TRIGGER agentwire_test_full ON messages").await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match client.generate(run("echo", "after", "full")).await {
            Ok(response) if response.get_ref().error.is_none() => break,
            other => {
                assert!(std::time::Instant::now() < deadline, "runs are saved again: {other:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
