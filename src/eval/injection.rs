//! The `prompt-injection-detector` evaluation: every text of the injection corpus through the
//! real server — the user's input of a Generate (the direct path), or the result of a remote
//! tool the agent calls (the indirect path: processToolResult) — blocked or not, scored per
//! language, per category and per path, for the whole detector and for its heuristic alone,
//! with the latency each path adds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use super::corpus::InjectionCase;
use super::paired::paired;
use crate::server::pb;
use crate::server::pb::agent_service_client::AgentServiceClient;
use crate::server::pb::processor_service_client::ProcessorServiceClient;

/// Runs in flight at once on the direct path (the indirect path's tool answers one at a time).
const CONCURRENCY: usize = 8;
/// The remote tool the indirect path's agents call, and the instance that serves it.
const TOOL: &str = "fetch";
const TOOL_SERVER: &str = "eval-tools";

/// A detector under evaluation: its agents' prefix.
#[derive(Debug, Clone, Copy)]
pub struct Detector {
    /// As reported.
    pub name: &'static str,
    prefix: &'static str,
}

/// The whole detector, then its first stage alone (what the n-gram model adds).
pub const DETECTORS: [Detector; 2] = [
    Detector { name: "heuristic + n-gram model", prefix: "pi" },
    Detector { name: "heuristic alone", prefix: "pi-heuristic" },
];

/// The agents: per detector one for each path, and both paths bare (for the latency).
pub(super) fn config() -> String {
    let mut config = format!(
        "\n[processors.pi]\nkind = \"prompt-injection-detector\"\n\n[processors.pi-heuristic]\nkind = \"prompt-injection-detector\"\nngram_model = false\n\n[tools.{TOOL}]\nkind = \"remote\"\nserver = \"{TOOL_SERVER}\"\ntimeout_ms = 10000\n"
    );
    let tool_script = format!(
        "script = [{{ tool_calls = [{{ name = \"{TOOL}\", args = {{}} }}] }}, {{ text = \"done\" }}]"
    );
    for (prefix, processors) in
        [("pi", "[\"pi\"]"), ("pi-heuristic", "[\"pi-heuristic\"]"), ("pi-bare", "[]")]
    {
        config += &format!(
            "\n[[agents]]\nid = \"{prefix}-direct\"\nmodel = \"mock/echo\"\ninput_processors = {processors}\n"
        );
        config += &format!(
            "\n[[agents]]\nid = \"{prefix}-tool\"\nmodel = \"mock/script\"\ntools = [\"{TOOL}\"]\noutput_processors = {processors}\n{tool_script}\n"
        );
    }
    config
}

/// Counts of a binary decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Confusion {
    /// Injections blocked.
    pub caught: u64,
    /// Injections let through.
    pub missed: u64,
    /// Benign texts blocked.
    pub false_alarms: u64,
    /// Benign texts let through.
    pub passed: u64,
}

impl Confusion {
    /// Counts one decision.
    pub fn add(&mut self, injection: bool, blocked: bool) {
        match (injection, blocked) {
            (true, true) => self.caught += 1,
            (true, false) => self.missed += 1,
            (false, true) => self.false_alarms += 1,
            (false, false) => self.passed += 1,
        }
    }

    /// Injections in it.
    pub fn attacks(&self) -> u64 {
        self.caught + self.missed
    }

    /// Benign texts in it.
    pub fn benign(&self) -> u64 {
        self.false_alarms + self.passed
    }

    /// Of what was blocked, the share that was an injection (1 when nothing was).
    pub fn precision(&self) -> f64 {
        ratio(self.caught, self.caught + self.false_alarms)
    }

    /// Of the injections, the share blocked.
    pub fn recall(&self) -> f64 {
        ratio(self.caught, self.attacks())
    }

    /// Of the benign texts, the share let through.
    pub fn specificity(&self) -> f64 {
        ratio(self.passed, self.benign())
    }

    /// The mean of recall and specificity: accuracy as if both classes were the same size.
    pub fn balanced_accuracy(&self) -> f64 {
        (self.recall() + self.specificity()) / 2.0
    }
}

impl std::ops::AddAssign for Confusion {
    fn add_assign(&mut self, other: Confusion) {
        self.caught += other.caught;
        self.missed += other.missed;
        self.false_alarms += other.false_alarms;
        self.passed += other.passed;
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 { 1.0 } else { part as f64 / whole as f64 }
}

/// The figures of one detector.
#[derive(Debug, Clone, Default)]
pub struct DetectorFigures {
    /// The detector's name.
    pub detector: &'static str,
    /// Per path (`direct`, `tool`).
    pub by_path: BTreeMap<String, Confusion>,
    /// Per language, the direct path.
    pub by_lang: BTreeMap<String, Confusion>,
    /// Per language, the tool path.
    pub by_lang_tool: BTreeMap<String, Confusion>,
    /// Per category, both paths.
    pub by_category: BTreeMap<String, Confusion>,
    /// Injections let through and benign texts blocked: (case id, category, text).
    pub misses: Vec<(String, String, String)>,
}

/// What the evaluation measured.
#[derive(Debug, Clone, Default)]
pub struct InjectionReport {
    /// One per detector run, the whole detector first.
    pub detectors: Vec<DetectorFigures>,
    /// p50 of a Generate with the whole detector and without, the direct path.
    pub direct_p50: (Duration, Duration),
    /// p50 of a Generate with the whole detector and without, the tool path.
    pub tool_p50: (Duration, Duration),
}

/// Runs `cases` through each of `detectors` and measures the latency added over up to
/// `latency_samples` texts of each path, spread over it.
pub(super) async fn evaluate(
    channel: &Channel,
    cases: &[InjectionCase],
    detectors: &[Detector],
    latency_samples: usize,
) -> Result<InjectionReport, String> {
    let tool = ToolServer::start(channel.clone()).await?;
    let (direct, indirect): (Vec<&InjectionCase>, Vec<&InjectionCase>) =
        cases.iter().partition(|case| case.path == "direct");
    let mut report = InjectionReport::default();
    // Spread over the path, so that every language, the long jailbreaks and the documents are in.
    let sample = |cases: &[&InjectionCase]| -> Vec<String> {
        let step = cases.len().div_ceil(latency_samples.max(1)).max(1);
        cases.iter().step_by(step).map(|case| case.text.clone()).collect()
    };
    report.direct_p50 = paired(&sample(&direct), |agent_text| async move {
        let (with, text) = agent_text;
        let agent = if with { "pi-direct" } else { "pi-bare-direct" };
        blocked(channel, agent, &text).await.map(|_| ())
    })
    .await?;
    report.tool_p50 = paired(&sample(&indirect), |agent_text| {
        let tool = &tool;
        async move {
            let (with, text) = agent_text;
            let agent = if with { "pi-tool" } else { "pi-bare-tool" };
            tool.answering(&text, blocked(channel, agent, "Fetch the page.")).await.map(|_| ())
        }
    })
    .await?;
    for detector in detectors {
        let mut figures = DetectorFigures { detector: detector.name, ..DetectorFigures::default() };
        let agent = format!("{}-direct", detector.prefix);
        let direct_outcomes: Vec<bool> = futures::stream::iter(&direct)
            .map(|case| blocked(channel, &agent, &case.text))
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        let agent = format!("{}-tool", detector.prefix);
        let mut tool_outcomes = Vec::with_capacity(indirect.len());
        for case in &indirect {
            tool_outcomes
                .push(tool.answering(&case.text, blocked(channel, &agent, "Fetch the page.")).await?);
        }
        for (case, blocked) in direct.iter().zip(direct_outcomes).chain(indirect.iter().zip(tool_outcomes)) {
            let mut one = Confusion::default();
            one.add(case.label, blocked);
            *figures.by_path.entry(case.path.clone()).or_default() += one;
            let by_lang =
                if case.path == "direct" { &mut figures.by_lang } else { &mut figures.by_lang_tool };
            *by_lang.entry(case.lang.clone()).or_default() += one;
            *figures.by_category.entry(case.category.clone()).or_default() += one;
            if case.label != blocked {
                figures.misses.push((case.id.clone(), case.category.clone(), case.text.clone()));
            }
        }
        report.detectors.push(figures);
    }
    tool.stop();
    Ok(report)
}

/// Whether a run of `agent` on `text` ended in a tripwire.
async fn blocked(channel: &Channel, agent: &str, text: &str) -> Result<bool, String> {
    let mut client = AgentServiceClient::new(channel.clone());
    let request = pb::RunRequest { agent_id: agent.to_owned(), text: text.to_owned(), ..Default::default() };
    let response = client
        .generate(request)
        .await
        .map_err(|status| format!("agent {agent}: {}", status.message()))?
        .into_inner();
    if let Some(error) = response.error {
        return Err(format!("agent {agent}: the run failed: {}", error.message));
    }
    Ok(response.tripwire.is_some())
}

/// The remote tool of the indirect path: an instance on the processor stream whose `fetch`
/// answers with the document of the run in flight (one at a time).
struct ToolServer {
    document: Arc<Mutex<String>>,
    turn: tokio::sync::Mutex<()>,
    task: tokio::task::JoinHandle<()>,
}

impl ToolServer {
    /// Connects the instance and waits for the server's welcome.
    async fn start(channel: Channel) -> Result<ToolServer, String> {
        let parameters = match crate::server::value::to_proto(&serde_json::json!({ "type": "object" })).kind {
            Some(prost_types::value::Kind::StructValue(fields)) => Some(fields),
            _ => None,
        };
        let hello = pb::Hello {
            processor_id: TOOL_SERVER.to_owned(),
            instance_id: format!("{TOOL_SERVER}-1"),
            min_protocol_version: 1,
            max_protocol_version: 2,
            tools: vec![pb::ToolSpec {
                name: TOOL.to_owned(),
                description: "The page or document to read".to_owned(),
                parameters,
            }],
            ..Default::default()
        };
        let (sender, receiver) = mpsc::channel(16);
        let message = |message| pb::ProcessorMessage { message: Some(message) };
        sender
            .send(message(pb::processor_message::Message::Hello(hello)))
            .await
            .map_err(|_| "the tool stream closed".to_owned())?;
        let mut stream = ProcessorServiceClient::new(channel)
            .connect(ReceiverStream::new(receiver))
            .await
            .map_err(|status| format!("the tool instance was refused: {}", status.message()))?
            .into_inner();
        match stream.message().await {
            Ok(Some(pb::ServerMessage { message: Some(pb::server_message::Message::Welcome(_)) })) => {}
            other => return Err(format!("the tool instance got no welcome: {other:?}")),
        }
        let document = Arc::new(Mutex::new(String::new()));
        let current = Arc::clone(&document);
        let task = tokio::spawn(async move {
            while let Ok(Some(next)) = stream.message().await {
                let reply = match next.message {
                    Some(pb::server_message::Message::ToolCall(call)) => {
                        let text = current.lock().expect("the document").clone();
                        let result = crate::server::value::to_proto(&serde_json::Value::String(text));
                        pb::processor_message::Message::ToolResult(pb::ToolOutput {
                            call_id: call.call_id,
                            result: Some(result),
                            error: String::new(),
                        })
                    }
                    Some(pb::server_message::Message::Ping(ping)) => {
                        pb::processor_message::Message::Pong(pb::Pong { nonce: ping.nonce })
                    }
                    _ => continue,
                };
                if sender.send(message(reply)).await.is_err() {
                    break;
                }
            }
        });
        Ok(ToolServer { document, turn: tokio::sync::Mutex::new(()), task })
    }

    /// Runs `run` with the tool answering `document`.
    async fn answering<T>(&self, document: &str, run: impl Future<Output = T>) -> T {
        let _turn = self.turn.lock().await;
        document.clone_into(&mut self.document.lock().expect("the document"));
        run.await
    }

    fn stop(self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Balanced accuracy weighs both classes the same however many of each there are, and empty
    /// counts read as perfect, not as NaN.
    #[test]
    fn balanced_accuracy_weighs_both_classes_alike() {
        let confusion = Confusion { caught: 90, missed: 10, false_alarms: 1, passed: 9 };
        assert!((confusion.recall() - 0.9).abs() < 1e-9);
        assert!((confusion.specificity() - 0.9).abs() < 1e-9);
        assert!((confusion.balanced_accuracy() - 0.9).abs() < 1e-9);
        assert!((confusion.precision() - 90.0 / 91.0).abs() < 1e-9);
        assert_eq!(Confusion::default().balanced_accuracy(), 1.0);
    }
}
