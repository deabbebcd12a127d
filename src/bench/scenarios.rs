//! The scenarios: what each one asks of the server, and how one worker asks it.

use futures::FutureExt;
use tonic::transport::Channel;

use super::fake_provider::{self, Arrivals};
use super::fixtures::{BLOCKED_WORD, GATEWAY_TOKENS, Pinger, STREAM_CHUNKS};
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
    /// `Stream`; the run must stream `deltas` text deltas.
    Stream { agent: &'static str, deltas: usize },
    /// The same deltas from the bare tonic floor.
    StreamFloor,
    /// One round trip on the bare tonic bidirectional floor.
    PingFloor,
    /// One `Generate` round trip on the bare tonic floor with the request agentwire gets for
    /// `agent`, answered with the response agentwire gave it: the same bytes both ways.
    UnaryFloor { agent: &'static str },
    /// The request agentwire makes of the fake provider for a model of `tokens` (streamed or
    /// not), sent to it directly over HTTP.
    Direct { tokens: usize, streamed: bool },
}

/// Where a scenario's requests go.
pub(super) struct Targets<'a> {
    /// agentwire.
    pub(super) server: &'a Channel,
    /// The stream and unary floor.
    pub(super) floors: &'a Channel,
    /// The ping-pong floor's address.
    pub(super) ping_floor: &'a str,
    /// The fake provider's base URL, when the bench started one (for a server it starts).
    pub(super) fake_provider: Option<&'a str>,
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

    /// A gateway scenario (G…): it needs the fake provider, and is measured at scale too.
    pub(super) fn is_gateway(&self) -> bool {
        self.id.starts_with('G')
    }
}

/// Every scenario, recall scenarios at the given resource sizes (their resources are named
/// `recall-<size>`).
pub(super) fn all(recall_sizes: &[usize]) -> Vec<Scenario> {
    let generate = |agent, threads| Ask::Generate { agent, text: "hello".into(), threads, trips: false };
    let mut scenarios = vec![
        Scenario::new("S1", "Generate \"hello\", no memory, no processors", generate("s1", Threads::None)),
        Scenario::new(
            "S1 floor",
            "a bare tonic unary round trip of S1's bytes",
            Ask::UnaryFloor { agent: "s1" },
        ),
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
        Scenario::new("S4", "Stream of 200 text deltas", Ask::Stream { agent: "s4", deltas: STREAM_CHUNKS }),
        Scenario::new(
            "S4+p",
            "S4 + a pass-through processOutputStream",
            Ask::Stream { agent: "s4-pass", deltas: STREAM_CHUNKS },
        ),
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
            Ask::Stream { agent: "r2", deltas: STREAM_CHUNKS },
        ),
    ]);
    scenarios.extend(gateway());
    scenarios
}

/// The gateway scenarios: agentwire in front of the fake provider, next to the same requests
/// sent to it directly, and the floors of one more gRPC hop.
fn gateway() -> Vec<Scenario> {
    let generate =
        |agent| Ask::Generate { agent, text: "hello".into(), threads: Threads::None, trips: false };
    vec![
        Scenario::new(
            "G1 direct",
            &format!("the fake provider called directly over HTTP ({GATEWAY_TOKENS} tokens, in one piece)"),
            Ask::Direct { tokens: GATEWAY_TOKENS, streamed: false },
        ),
        Scenario::new("G1", "Generate through agentwire to the fake provider, no processors", generate("g1")),
        Scenario::new(
            "G1 floor",
            "a bare tonic unary round trip of G1's bytes",
            Ask::UnaryFloor { agent: "g1" },
        ),
        Scenario::new(
            "G1+s direct",
            &format!("the fake provider streaming its {GATEWAY_TOKENS} tokens, called directly over HTTP"),
            Ask::Direct { tokens: GATEWAY_TOKENS, streamed: true },
        ),
        Scenario::new(
            "G1+s",
            "G1 + a pass-through processOutputStream: the provider streams the answer",
            generate("g1-streamed"),
        ),
        Scenario::new(
            "G2 direct",
            &format!("the fake provider streaming {STREAM_CHUNKS} tokens, called directly over HTTP"),
            Ask::Direct { tokens: STREAM_CHUNKS, streamed: true },
        ),
        Scenario::new(
            "G2",
            &format!("Stream through agentwire from the fake provider, {STREAM_CHUNKS} tokens"),
            Ask::Stream { agent: "g2", deltas: STREAM_CHUNKS },
        ),
        Scenario::new(
            "G2 floor",
            &format!("a bare tonic server stream of {STREAM_CHUNKS} text deltas"),
            Ask::StreamFloor,
        ),
        Scenario::new(
            "G3",
            "G1 + unicode-normalizer, pii-detector, prompt-injection-detector on input, pii-detector on the stream",
            generate("g3"),
        ),
    ]
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

/// The request of `agent` a unary floor is sent, as agentwire is.
pub(super) fn unary_floor_request(agent: &str) -> pb::RunRequest {
    run_request(agent, "hello", &Threads::None, 0, 0)
}

/// One worker of `scenario`, numbered `worker`.
pub(super) async fn worker(
    scenario: &Scenario,
    targets: &Targets<'_>,
    worker: usize,
) -> Result<Call, String> {
    let call: Call = match scenario.ask.clone() {
        Ask::Generate { agent, text, threads, trips } => {
            let client = AgentServiceClient::new(targets.server.clone());
            let mut run = 0;
            Box::new(move || {
                run += 1;
                let request = run_request(agent, &text, &threads, worker, run);
                let mut client = client.clone();
                async move {
                    let result =
                        client.generate(request).await.map_err(|status| status.to_string())?.into_inner();
                    match (trips, &result.tripwire, result.finish_reason.as_str()) {
                        (false, None, "stop") | (true, Some(_), _) => Ok(Arrivals::default()),
                        _ => Err(format!("agent `{agent}` answered unexpectedly: {result:?}")),
                    }
                }
                .boxed()
            })
        }
        Ask::Stream { agent, deltas } => {
            let client = AgentServiceClient::new(targets.server.clone());
            Box::new(move || {
                stream(client.clone(), run_request(agent, "go", &Threads::None, worker, 0), deltas).boxed()
            })
        }
        Ask::StreamFloor => {
            let client = AgentServiceClient::new(targets.floors.clone());
            Box::new(move || stream(client.clone(), pb::RunRequest::default(), STREAM_CHUNKS).boxed())
        }
        Ask::PingFloor => {
            let pinger = Pinger::connect(targets.ping_floor).await?;
            let pinger = std::sync::Arc::new(tokio::sync::Mutex::new(pinger));
            Box::new(move || {
                let pinger = std::sync::Arc::clone(&pinger);
                async move { pinger.lock().await.round_trip().await.map(|()| Arrivals::default()) }.boxed()
            })
        }
        Ask::UnaryFloor { agent } => {
            let client = AgentServiceClient::new(targets.floors.clone());
            Box::new(move || {
                let mut client = client.clone();
                async move {
                    client.generate(unary_floor_request(agent)).await.map_err(|status| status.to_string())?;
                    Ok(Arrivals::default())
                }
                .boxed()
            })
        }
        Ask::Direct { tokens, streamed } => {
            let base = targets.fake_provider.ok_or("the gateway scenarios need the fake provider")?;
            let url = format!("{base}/chat/completions");
            let body = fake_provider::request_body(&fake_provider::model(tokens), "hello", streamed);
            let client = reqwest::Client::builder().build().map_err(|error| error.to_string())?;
            Box::new(move || {
                let (client, url, body) = (client.clone(), url.clone(), body.clone());
                async move { fake_provider::call_directly(&client, &url, body, tokens, streamed).await }
                    .boxed()
            })
        }
    };
    Ok(call)
}

/// Streams one run and checks it carried `expected` deltas, noting when each arrived.
async fn stream(
    mut client: AgentServiceClient<Channel>,
    request: pb::RunRequest,
    expected: usize,
) -> Result<Arrivals, String> {
    let sent = std::time::Instant::now();
    let mut chunks = client.stream(request).await.map_err(|status| status.to_string())?.into_inner();
    let mut arrivals = Arrivals::default();
    while let Some(chunk) = chunks.message().await.map_err(|status| status.to_string())? {
        if chunk.r#type == "text-delta" {
            arrivals.arrived(sent, 1);
        }
    }
    if arrivals.tokens == expected {
        Ok(arrivals)
    } else {
        Err(format!("a stream carried {} deltas, not {expected}", arrivals.tokens))
    }
}
