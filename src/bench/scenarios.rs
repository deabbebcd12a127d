//! The scenarios: what each one asks of the server, and how one worker asks it.

use futures::FutureExt;
use tonic::transport::Channel;

use super::fixtures::{BLOCKED_WORD, Pinger, STREAM_CHUNKS};
use super::load::Call;
use crate::server::pb;
use crate::server::pb::agent_service_client::AgentServiceClient;

/// The threads a scenario's runs go to.
#[derive(Debug, Clone)]
pub(super) enum Threads {
    /// No memory.
    None,
    /// One thread, of resource `bench`, for every run.
    One(String),
    /// A new thread for each run, in this resource.
    Each(String),
}

/// What one request of a scenario is.
#[derive(Debug, Clone)]
pub(super) enum Ask {
    /// `Generate` with a text; the run must finish (`stop`), or trip when `trips`.
    Generate { agent: &'static str, text: String, threads: Threads, trips: bool },
    /// `Stream`; the run must stream [`STREAM_CHUNKS`] text deltas.
    Stream { agent: &'static str },
    /// The same deltas from the bare tonic floor.
    StreamFloor,
    /// One round trip on the bare tonic bidirectional floor.
    PingFloor,
}

/// One scenario.
#[derive(Debug, Clone)]
pub(super) struct Scenario {
    /// `S1`, `S2a`, ... as the issue and BENCHMARKS.md name them.
    pub(super) id: String,
    /// What it measures.
    pub(super) what: String,
    pub(super) ask: Ask,
}

impl Scenario {
    pub(super) fn new(id: &str, what: &str, ask: Ask) -> Scenario {
        Scenario { id: id.to_owned(), what: what.to_owned(), ask }
    }
}

/// Every scenario, recall scenarios at the given resource sizes (their resources are named
/// `recall-<size>`).
pub(super) fn all(recall_sizes: &[usize]) -> Vec<Scenario> {
    let generate = |agent, threads| Ask::Generate { agent, text: "hello".into(), threads, trips: false };
    let mut scenarios = vec![
        Scenario::new("S1", "Generate \"hello\", no memory, no processors", generate("s1", Threads::None)),
        Scenario::new(
            "S2a",
            "S1 + last_messages = 10, one thread past 1,000 messages",
            generate("s2", Threads::One("bench-long".into())),
        ),
        Scenario::new(
            "S2b",
            "S1 + last_messages = 10, a new thread per request",
            generate("s2", Threads::Each("bench-fresh".into())),
        ),
        Scenario::new(
            "S3",
            "S1 + pass-through processInput, processOutputStream, processOutputResult",
            generate("s3", Threads::None),
        ),
        Scenario::new("S4", "Stream of 200 text deltas", Ask::Stream { agent: "s4" }),
        Scenario::new("S4+p", "S4 + a pass-through processOutputStream", Ask::Stream { agent: "s4-pass" }),
        Scenario::new("S4 floor", "the same 200 deltas over a bare tonic stream", Ask::StreamFloor),
        Scenario::new(
            "S5",
            "an input guardrail aborts (memory on: nothing may be saved)",
            Ask::Generate {
                agent: "s5",
                text: format!("tell me the {BLOCKED_WORD} thing"),
                threads: Threads::Each("bench-aborted".into()),
                trips: true,
            },
        ),
    ];
    for size in recall_sizes {
        let resource = format!("recall-{size}");
        let text = "my coffee order and the hotel invoice".to_owned();
        scenarios.push(Scenario::new(
            &format!("S6 {size}"),
            &format!("semantic recall (resource scope, top 3) over {size} stored messages"),
            Ask::Generate {
                agent: "s6",
                text: text.clone(),
                threads: Threads::Each(resource.clone()),
                trips: false,
            },
        ));
        scenarios.push(Scenario::new(
            &format!("S6 {size} control"),
            "the same without recall (history only)",
            Ask::Generate { agent: "s6-control", text, threads: Threads::Each(resource), trips: false },
        ));
    }
    scenarios.extend([
        Scenario::new("R1", "S1 + a blocking remote processInput", generate("r1", Threads::None)),
        Scenario::new("R1 floor", "a bare tonic bidirectional ping-pong round trip", Ask::PingFloor),
        Scenario::new(
            "R2",
            "S4 + a remote processOutputStream guard in windows of 32",
            Ask::Stream { agent: "r2" },
        ),
    ]);
    scenarios
}

/// The request of `ask` for a run, numbered `run` within worker `worker`.
fn run_request(agent: &str, text: &str, threads: &Threads, worker: usize, run: u64) -> pb::RunRequest {
    let (thread_id, resource_id) = match threads {
        Threads::None => (String::new(), String::new()),
        Threads::One(thread) => (thread.clone(), "bench".to_owned()),
        Threads::Each(resource) => (format!("{resource}-{worker}-{run}"), resource.clone()),
    };
    pb::RunRequest { agent_id: agent.into(), text: text.into(), thread_id, resource_id, ..Default::default() }
}

/// One worker of `scenario`: `server` is agentwire's address, `floors` the floors' (stream, ping).
pub(super) async fn worker(
    scenario: &Scenario,
    server: &Channel,
    floors: &Channel,
    ping_floor: &str,
    worker: usize,
) -> Result<Call, String> {
    let call: Call = match scenario.ask.clone() {
        Ask::Generate { agent, text, threads, trips } => {
            let client = AgentServiceClient::new(server.clone());
            let mut run = 0;
            Box::new(move || {
                run += 1;
                let request = run_request(agent, &text, &threads, worker, run);
                let mut client = client.clone();
                async move {
                    let result =
                        client.generate(request).await.map_err(|status| status.to_string())?.into_inner();
                    match (trips, &result.tripwire, result.finish_reason.as_str()) {
                        (false, None, "stop") | (true, Some(_), _) => Ok(()),
                        _ => Err(format!("agent `{agent}` answered unexpectedly: {result:?}")),
                    }
                }
                .boxed()
            })
        }
        Ask::Stream { agent } => {
            let client = AgentServiceClient::new(server.clone());
            Box::new(move || {
                stream(client.clone(), run_request(agent, "go", &Threads::None, worker, 0)).boxed()
            })
        }
        Ask::StreamFloor => {
            let client = AgentServiceClient::new(floors.clone());
            Box::new(move || stream(client.clone(), pb::RunRequest::default()).boxed())
        }
        Ask::PingFloor => {
            let pinger = std::sync::Arc::new(tokio::sync::Mutex::new(Pinger::connect(ping_floor).await?));
            Box::new(move || {
                let pinger = std::sync::Arc::clone(&pinger);
                async move { pinger.lock().await.round_trip().await }.boxed()
            })
        }
    };
    Ok(call)
}

/// Streams one run and checks it carried every delta.
async fn stream(mut client: AgentServiceClient<Channel>, request: pb::RunRequest) -> Result<(), String> {
    let mut chunks = client.stream(request).await.map_err(|status| status.to_string())?.into_inner();
    let mut deltas = 0;
    while let Some(chunk) = chunks.message().await.map_err(|status| status.to_string())? {
        deltas += usize::from(chunk.r#type == "text-delta");
    }
    if deltas == STREAM_CHUNKS {
        Ok(())
    } else {
        Err(format!("a stream carried {deltas} deltas, not {STREAM_CHUNKS}"))
    }
}
