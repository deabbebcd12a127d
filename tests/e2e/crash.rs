//! Durability: the real server under concurrent runs is killed with SIGKILL; the store must
//! reopen cleanly, hold every run whose `finish` a client received (its messages, and the
//! vectors semantic recall finds them by), and show no half run.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire::memory::embedder::{Embedder, Lexical};
use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::storage::{Direction, RecallScope, SledStore, Store, VectorQuery};

const CONFIG: &str = r#"
[[agents]]
id = "echo"
model = "mock/echo"
memory = { last_messages = 2, semantic_recall = {} }
"#;

/// The finished runs of each thread, newest first, whose vectors are searched after each kill.
const RECALLED: usize = 20;

/// Concurrent clients, each with its own thread.
const CLIENTS: usize = 16;
/// Kill-and-check rounds on the same data directory (`AGENTWIRE_CRASH_ROUNDS` overrides it:
/// `scripts/soak-crash` runs hundreds).
const ROUNDS: usize = 6;

fn rounds() -> usize {
    std::env::var("AGENTWIRE_CRASH_ROUNDS").ok().and_then(|rounds| rounds.parse().ok()).unwrap_or(ROUNDS)
}

/// How long round `round` runs before the kill: a moment between 150 and 450 ms, inside sled's
/// own 500 ms background flush, so that only our flush before `finish` can save the last runs.
fn kill_moment(round: usize) -> Duration {
    let jitter =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64;
    Duration::from_millis(150 + (round as u64 * 97 + jitter % 89) % 300)
}

/// Streams runs on `thread` until the server dies; records each run whose `finish` arrived.
async fn client_loop(
    addr: String,
    client_index: usize,
    round: usize,
    finished: Arc<Mutex<Vec<(String, String)>>>,
) {
    let Ok(endpoint) = tonic::transport::Endpoint::from_shared(format!("http://{addr}")) else { return };
    let Ok(channel) = endpoint.connect().await else { return };
    let mut client = AgentServiceClient::new(channel);
    let thread = format!("thread-{client_index}");
    for run_index in 0.. {
        let text = format!("round {round} run {run_index} of client {client_index}");
        let request = pb::RunRequest {
            agent_id: "echo".into(),
            text: text.clone(),
            thread_id: thread.clone(),
            resource_id: "crash-test".into(),
            ..Default::default()
        };
        let Ok(response) = client.stream(request).await else { return };
        let mut stream = response.into_inner();
        loop {
            match stream.message().await {
                Ok(Some(chunk)) if chunk.r#type == "finish" => {
                    finished.lock().unwrap().push((thread.clone(), text.clone()));
                    break;
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            }
        }
    }
}

fn text_of(message: &agentwire::domain::Message) -> String {
    message.text()
}

/// Every finished run is stored whole; every stored run is whole (a user message followed by
/// its answer); the store reopens after each kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_finished_run_and_leaves_no_half_run() {
    kill_9_rounds(None).await;
}

/// The same with the store in PostgreSQL: a replica killed with SIGKILL loses no run whose
/// `finish` a client received (committed durably before it), and leaves no half run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_on_postgres_loses_no_finished_run() {
    let Some(url) = crate::common::postgres::fresh_database().await else { return };
    kill_9_rounds(Some(&url)).await;
}

/// The variable the PostgreSQL rounds name in `[storage.postgres] url_env`.
const URL_ENV: &str = "AGENTWIRE_CRASH_TEST_URL";

/// Kill-and-check rounds on one store: sled in a data directory, or PostgreSQL at `postgres`.
async fn kill_9_rounds(postgres: Option<&str>) {
    let data_dir = tempfile::tempdir().unwrap();
    let config_path = data_dir.path().join("agentwire.toml");
    let storage = match postgres {
        Some(_) => {
            format!("\n[storage]\nbackend = \"postgres\"\n\n[storage.postgres]\nurl_env = \"{URL_ENV}\"\n")
        }
        None => String::new(),
    };
    std::fs::write(&config_path, format!("{CONFIG}{storage}")).unwrap();
    let mut all_finished: Vec<(String, String)> = Vec::new();
    for round in 0..rounds() {
        let mut server = Command::new(env!("CARGO_BIN_EXE_agentwire"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config_path)
            .arg("--data-dir")
            .arg(data_dir.path())
            .env(URL_ENV, postgres.unwrap_or_default())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        BufReader::new(server.stdout.take().unwrap()).read_line(&mut ready).unwrap();
        let addr = ready.trim().strip_prefix("agentwire listening on ").expect("ready line").to_owned();

        let finished = Arc::new(Mutex::new(Vec::new()));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|index| tokio::spawn(client_loop(addr.clone(), index, round, Arc::clone(&finished))))
            .collect();
        // The kill comes a moment after the load is flowing: a store grown over many rounds
        // takes longer to open and to load for recall.
        let flowing = std::time::Instant::now();
        while finished.lock().unwrap().is_empty() && flowing.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(kill_moment(round)).await;
        server.kill().unwrap(); // SIGKILL
        server.wait().unwrap();
        for client in clients {
            let _ = client.await;
        }
        let finished = finished.lock().unwrap().clone();
        assert!(!finished.is_empty(), "round {round}: the load ran");
        eprintln!("round {round}: {} runs finished before the kill", finished.len());
        all_finished.extend(finished);

        let store: Box<dyn Store> = match postgres {
            Some(url) => Box::new(crate::common::postgres::connect(url).await),
            None => Box::new(
                SledStore::open(&data_dir.path().join("store")).expect("the store reopens after SIGKILL"),
            ),
        };
        for index in 0..CLIENTS {
            let thread = format!("thread-{index}");
            let messages = store
                .list_messages("crash-test", &thread, Direction::Forward, "", 100_000)
                .await
                .unwrap()
                .messages;
            assert_eq!(messages.len() % 2, 0, "{thread}: a half run is visible");
            for pair in messages.chunks(2) {
                let (question, answer) = (text_of(&pair[0].message), text_of(&pair[1].message));
                assert_eq!(
                    answer,
                    format!("echo: {question}"),
                    "{thread}: runs are stored whole and in order"
                );
            }
            let stored: Vec<String> = messages.iter().map(|stored| text_of(&stored.message)).collect();
            for (finished_thread, text) in &all_finished {
                if *finished_thread == thread {
                    assert!(stored.contains(text), "{thread}: the finished run `{text}` was lost");
                }
            }
            // The last runs before the kill are found by their own text's vector.
            let finished_here = all_finished.iter().filter(|(finished_thread, _)| *finished_thread == thread);
            for (_, text) in finished_here.rev().take(RECALLED) {
                let seq =
                    messages.iter().find(|stored| text_of(&stored.message) == *text).expect("stored").seq;
                let query = VectorQuery {
                    scope: RecallScope::Thread {
                        resource_id: "crash-test".into(),
                        thread_id: thread.clone(),
                    },
                    embedder: Lexical::new().id().to_owned(),
                    vector: Lexical::embed_one(text),
                    top_k: 1,
                    threshold: Some(0.999),
                };
                let hits = store.search(query).await.unwrap();
                assert_eq!(
                    hits.iter().map(|hit| hit.seq).collect::<Vec<_>>(),
                    [seq],
                    "{thread}: the vector of the finished run `{text}` was lost"
                );
            }
        }
        drop(store);
    }
}
