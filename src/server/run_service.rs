//! `agentwire.v1.RunService`: the records runs leave, for operators. Scoped like memory: an
//! admin key (or an open server) sees every run; another key lists and watches the runs of a
//! resource it may use and of agents it may call, and reads a run only when it may use the run's
//! resource and agent. A record's content shows the prompts' system messages only to a caller
//! that may read the agent's instructions, as `GetAgent` does.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::broadcast::error::RecvError;
use tonic::{Request, Response, Status};

use super::auth::{Access, Auth};
use super::convert::id_fits;
use super::pb;
use super::run_convert::{RecordView, record_to_pb, start_to_pb, stats_to_pb};
use crate::domain::{RunEvent, RunOutcome, RunRecord, RunStats, buckets};
use crate::runtime::{RunError, Runtime};
use crate::storage::{RunFilter, Store};

/// Page size when a request gives none.
const DEFAULT_PAGE_SIZE: u32 = 50;
/// The largest page a request may ask for.
const MAX_PAGE_SIZE: u32 = 500;
/// The most runs `GetStats` counts (the newest of its window).
const MAX_STATS_RUNS: usize = 10_000;
/// The shortest bucket `GetStats` cuts a window into.
const MIN_BUCKET_MS: i64 = 1000;

/// The run service over a store.
#[derive(Debug)]
pub(super) struct RunServiceImpl {
    store: Arc<dyn Store>,
    auth: Arc<Auth>,
    /// Whose feed `WatchRuns` follows.
    runtime: Arc<Runtime>,
}

impl RunServiceImpl {
    pub(super) fn new(store: Arc<dyn Store>, auth: Arc<Auth>, runtime: Arc<Runtime>) -> RunServiceImpl {
        RunServiceImpl { store, auth, runtime }
    }
}

/// `filter` narrowed to what the caller may see: an admin key (or an open server) sees every run;
/// another key must name a resource it may use, may name only an agent it may call, and sees
/// only its agents' runs.
fn scoped(access: &Access, mut filter: RunFilter) -> Result<RunFilter, Status> {
    if access.admin().is_ok() {
        return Ok(filter);
    }
    if filter.resource_id.is_empty() {
        return Err(RunError::invalid("resource_id", "is required for a key that is not an admin key").into());
    }
    access.resource(&filter.resource_id)?;
    if !filter.agent_id.is_empty() {
        access.agent(&filter.agent_id)?;
    }
    filter.agents = access.agent_scope();
    Ok(filter)
}

/// How much of a record the caller gets: the whole record (but for a list), its prompts' system
/// messages — the agent's instructions among them — only when the caller may read the agent's
/// instructions, as `GetAgent` shows them.
fn view_of(access: &Access, record: &RunRecord) -> RecordView {
    if access.reads_instructions(&record.agent_id) {
        RecordView::Whole
    } else {
        RecordView::WithoutInstructions
    }
}

/// The filter of a list or watch request; each bad field named.
fn filter_of(
    [agent_id, resource_id, thread_id, outcome, processor_id]: [&str; 5],
    since: i64,
    until: i64,
) -> Result<RunFilter, Status> {
    for (field, value) in [
        ("agent_id", agent_id),
        ("resource_id", resource_id),
        ("thread_id", thread_id),
        ("processor_id", processor_id),
    ] {
        id_fits(field, value)?;
    }
    if !thread_id.is_empty() && resource_id.is_empty() {
        return Err(RunError::invalid("thread_id", "needs resource_id (a thread is its resource's)").into());
    }
    let outcome = match outcome {
        "" => None,
        name => Some(RunOutcome::parse(name).ok_or_else(|| {
            RunError::invalid(
                "outcome",
                format!("must be one of finished, tripwire, error, cancelled, timed-out; got `{name}`"),
            )
        })?),
    };
    let bound = |field: &str, value: i64| match value {
        0 => Ok(None),
        value if value < 0 => {
            Err(Status::from(RunError::invalid(field, "must be milliseconds since the epoch")))
        }
        value => Ok(Some(value)),
    };
    Ok(RunFilter {
        agent_id: agent_id.to_owned(),
        resource_id: resource_id.to_owned(),
        thread_id: thread_id.to_owned(),
        outcome,
        processor_id: processor_id.to_owned(),
        since: bound("since", since)?,
        until: bound("until", until)?,
        agents: None,
    })
}

type EventStream = Pin<Box<dyn Stream<Item = Result<pb::RunEvent, Status>> + Send>>;

#[tonic::async_trait]
impl pb::run_service_server::RunService for RunServiceImpl {
    type WatchRunsStream = EventStream;

    async fn list_runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<pb::ListRunsResponse>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        let fields = [
            request.agent_id.as_str(),
            &request.resource_id,
            &request.thread_id,
            &request.outcome,
            &request.processor_id,
        ];
        let filter = scoped(&access, filter_of(fields, request.since, request.until)?)?;
        let limit = match request.page_size {
            0 => DEFAULT_PAGE_SIZE,
            size if size > MAX_PAGE_SIZE => {
                return Err(RunError::invalid(
                    "page_size",
                    format!("must be at most {MAX_PAGE_SIZE}, got {size}"),
                )
                .into());
            }
            size => size,
        };
        let page = self.store.list_run_records(&filter, &request.page_token, limit as usize).await?;
        Ok(Response::new(pb::ListRunsResponse {
            runs: page.runs.into_iter().map(|record| record_to_pb(record, RecordView::Summary)).collect(),
            next_page_token: page.next_cursor,
        }))
    }

    async fn get_run(&self, request: Request<pb::GetRunRequest>) -> Result<Response<pb::RunRecord>, Status> {
        let access = self.auth.access(&request)?;
        let run_id = request.into_inner().run_id;
        if run_id.is_empty() {
            return Err(RunError::invalid("run_id", "is required").into());
        }
        id_fits("run_id", &run_id)?;
        let not_found = || Status::not_found(format!("run `{run_id}` has no record (unknown, or pruned)"));
        let record = self.store.get_run_record(&run_id).await?.ok_or_else(not_found)?;
        // A key that may not see it is told what anyone is told of an unknown run.
        if access.admin().is_err()
            && (record.resource_id.is_empty()
                || access.resource(&record.resource_id).is_err()
                || access.agent(&record.agent_id).is_err())
        {
            return Err(not_found());
        }
        let view = view_of(&access, &record);
        Ok(Response::new(record_to_pb(record, view)))
    }

    async fn watch_runs(
        &self,
        request: Request<pb::WatchRunsRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        let fields = [
            request.agent_id.as_str(),
            &request.resource_id,
            &request.thread_id,
            &request.outcome,
            &request.processor_id,
        ];
        let filter = scoped(&access, filter_of(fields, 0, 0)?)?;
        let feed = self.runtime.watch_runs();
        let events =
            futures::stream::unfold((feed, filter, access), |(mut feed, filter, access)| async move {
                loop {
                    let event = match feed.recv().await {
                        Ok(RunEvent::Started(start)) if filter.matches_start(&start) => {
                            pb::run_event::Event::Started(start_to_pb(*start))
                        }
                        Ok(RunEvent::Ended(record)) if filter.matches(&record) => {
                            let view = view_of(&access, &record);
                            pb::run_event::Event::Ended(record_to_pb(*record, view))
                        }
                        Ok(_) => continue,
                        Err(RecvError::Lagged(missed)) => pb::run_event::Event::Missed(missed),
                        Err(RecvError::Closed) => return None,
                    };
                    return Some((Ok(pb::RunEvent { event: Some(event) }), (feed, filter, access)));
                }
            });
        Ok(Response::new(Box::pin(events)))
    }

    async fn get_stats(
        &self,
        request: Request<pb::GetStatsRequest>,
    ) -> Result<Response<pb::RunStats>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        let bucket_ms = request.bucket_ms;
        if bucket_ms != 0 && bucket_ms < MIN_BUCKET_MS {
            return Err(Status::invalid_argument(format!(
                "bucket_ms: {bucket_ms} is under {MIN_BUCKET_MS} (one second); 0 asks for no buckets"
            )));
        }
        let fields = [request.agent_id.as_str(), &request.resource_id, "", "", ""];
        let filter = scoped(&access, filter_of(fields, request.since, request.until)?)?;
        // The newest MAX_STATS_RUNS, and whether the window held more.
        let tallies = self.store.run_tallies(&filter, MAX_STATS_RUNS + 1).await?;
        let counted = tallies[..tallies.len().min(MAX_STATS_RUNS)].iter().map(Arc::as_ref);
        let stats = RunStats::of(counted.clone());
        let buckets = if bucket_ms == 0 { Vec::new() } else { buckets(counted, bucket_ms) };
        Ok(Response::new(stats_to_pb(stats, tallies.len() <= MAX_STATS_RUNS, buckets)))
    }
}
