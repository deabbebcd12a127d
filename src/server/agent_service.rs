//! `agentwire.v1.AgentService`: convert, call the runtime, convert back.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tokio_stream::StreamExt;
use tonic::{Code, Request, Response, Status};

use super::auth::{Access, Auth};
use super::convert::chunk_to_pb;
use super::limits::{Caller, LimitError, RunSlots, Slot};
use super::pb;
use super::status::status;
use crate::domain::TraceContext;
use crate::runtime::{Agent, ChunkSink, CutOff, RunError, RunRequest, Runtime};
use crate::telemetry::{metrics, propagation};

/// The agent service over a runtime.
#[derive(Debug)]
pub(super) struct AgentServiceImpl {
    runtime: Arc<Runtime>,
    auth: Arc<Auth>,
    slots: RunSlots,
    /// `[limits] slow_client_ms`: how long a streaming client may leave no room for a chunk.
    slow_client: Duration,
}

impl AgentServiceImpl {
    pub(super) fn new(
        runtime: Arc<Runtime>,
        auth: Arc<Auth>,
        slots: RunSlots,
        slow_client: Duration,
    ) -> AgentServiceImpl {
        AgentServiceImpl { runtime, auth, slots, slow_client }
    }

    /// The run a request asks for, if its caller may: the agent, and the resource its memory
    /// would use (the thread's id when it names no resource).
    fn authorized_run(&self, request: Request<pb::RunRequest>) -> Result<(RunRequest, Caller), Status> {
        let access = self.auth.access(&request)?;
        let caller = access.caller(request.remote_addr());
        let trace_context = trace_context_of(request.metadata());
        let mut run = RunRequest::try_from(request.into_inner())?;
        run.trace_context = trace_context;
        run.quota = access.quota();
        run.allowance = access.allowance().cloned();
        run.key_name = access.key_name().to_owned();
        access.agent(&run.agent_id)?;
        let resource = if run.resource_id.is_empty() { &run.thread_id } else { &run.resource_id };
        if !resource.is_empty() {
            access.resource(resource)?;
        }
        Ok((run, caller))
    }

    /// A run slot for `caller`; a refusal is counted by the limit that refused it.
    async fn slot(&self, caller: &Caller) -> Result<Slot, Status> {
        self.slots.acquire(caller).await.map_err(|error| {
            let limit = match &error {
                LimitError::CallerBusy { .. } => "max_concurrent_runs_per_caller",
                _ => "max_concurrent_runs",
            };
            metrics::global().count(&metrics::RUNS_REFUSED, &[("limit", limit)], 1);
            Status::from(error)
        })
    }
}

type ChunkStream = Pin<Box<dyn Stream<Item = Result<pb::Chunk, Status>> + Send>>;

#[tonic::async_trait]
impl pb::agent_service_server::AgentService for AgentServiceImpl {
    type StreamStream = ChunkStream;

    async fn stream(&self, request: Request<pb::RunRequest>) -> Result<Response<ChunkStream>, Status> {
        let (run_request, caller) = self.authorized_run(request)?;
        let slot = self.slot(&caller).await?;
        let run = self.runtime.prepare(run_request).await?;
        let run_id: Arc<str> = Arc::from(run.run_id());
        let (sender, receiver) = self.runtime.stream_budget().open();
        let sink = ChunkSink::channel(sender, self.slow_client);
        sink.hold_while_running(slot);
        // The run stops by itself when the client drops the stream (the sink closes) or is cut
        // off (too slow, or holding the most when the server's stream buffers are full).
        tokio::spawn(async move {
            run.execute(sink).await;
        });
        // The run's chunks to their end — or, once the client is cut off, the status saying why.
        let limit = self.slow_client;
        let cut_off = receiver.cut_off_watch();
        let chunks = receiver.map(move |chunk| Ok(chunk_to_pb(&run_id, chunk)));
        let cut_status = futures::stream::iter([()])
            .filter_map(move |()| cut_off().map(|reason| Err(cut_off_status(reason, limit))));
        let stream = chunks.chain(cut_status);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn generate(
        &self,
        request: Request<pb::RunRequest>,
    ) -> Result<Response<pb::GenerateResponse>, Status> {
        let (run_request, caller) = self.authorized_run(request)?;
        let _slot = self.slot(&caller).await?;
        let run = self.runtime.prepare(run_request).await?;
        // Dropping this future (the client cancelled) drops the run with it.
        let result = run.execute(ChunkSink::discard()).await;
        Ok(Response::new(result.into()))
    }

    async fn list_agents(
        &self,
        request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        let access = self.auth.access(&request)?;
        let agents = self
            .runtime
            .agents()
            .filter(|agent| access.sees_agent(&agent.id))
            .map(|agent| described(agent, &access))
            .collect();
        Ok(Response::new(pb::ListAgentsResponse { agents }))
    }

    async fn get_agent(&self, request: Request<pb::GetAgentRequest>) -> Result<Response<pb::Agent>, Status> {
        let access = self.auth.access(&request)?;
        let agent_id = request.into_inner().agent_id;
        if agent_id.is_empty() {
            return Err(RunError::invalid("agent_id", "is required").into());
        }
        access.agent(&agent_id)?;
        match self.runtime.agent(&agent_id) {
            Some(agent) => Ok(Response::new(described(agent, &access))),
            None => Err(RunError::AgentNotFound(agent_id).into()),
        }
    }
}

/// How the stream of a client cut off for reading too slowly ends.
fn cut_off_status(reason: CutOff, slow_client: Duration) -> Status {
    let why = match reason {
        CutOff::SlowClient => format!(
            "the client read too slowly: no room for the next chunk within limits.slow_client_ms ({} ms)",
            slow_client.as_millis()
        ),
        CutOff::BuffersFull => "the server's stream buffers were full (limits.max_buffered_mb) and this \
                                stream held the most unread chunks"
            .to_owned(),
    };
    status(
        Code::ResourceExhausted,
        format!("{why}; the run was stopped (cut off before it finished, it saved nothing)"),
    )
}

/// An agent as this caller may see it: without its instructions unless the caller's key may read
/// them.
fn described(agent: &Agent, access: &Access) -> pb::Agent {
    let mut described = pb::Agent::from(agent);
    if !access.reads_instructions(&agent.id) {
        described.instructions.clear();
    }
    if !access.reads_configuration(&agent.id) {
        for processor in &mut described.pipeline {
            processor.options = None;
        }
    }
    described
}

/// The caller's W3C trace context, from the request's metadata (values that are not text are
/// ignored, as a malformed `traceparent` is).
fn trace_context_of(metadata: &tonic::metadata::MetadataMap) -> TraceContext {
    propagation::FIELDS
        .iter()
        .filter_map(|field| {
            let value = metadata.get(*field)?.to_str().ok()?;
            Some(((*field).to_owned(), value.to_owned()))
        })
        .collect()
}
