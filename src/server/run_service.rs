//! `agentwire.v1.RunService`: the records runs leave, for operators. Scoped like memory: an
//! admin key (or an open server) sees every run; another key lists the runs of a resource it
//! may use, and reads a run only when it may use the run's resource and agent.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::auth::Auth;
use super::convert::id_fits;
use super::pb;
use super::run_convert::record_to_pb;
use crate::domain::RunOutcome;
use crate::runtime::RunError;
use crate::storage::{RunFilter, Store};

/// Page size when a request gives none.
const DEFAULT_PAGE_SIZE: u32 = 50;
/// The largest page a request may ask for.
const MAX_PAGE_SIZE: u32 = 500;

/// The run service over a store.
#[derive(Debug)]
pub(super) struct RunServiceImpl {
    store: Arc<dyn Store>,
    auth: Arc<Auth>,
}

impl RunServiceImpl {
    pub(super) fn new(store: Arc<dyn Store>, auth: Arc<Auth>) -> RunServiceImpl {
        RunServiceImpl { store, auth }
    }
}

/// The filter a request asks for; each bad field named.
fn filter_of(request: &pb::ListRunsRequest) -> Result<RunFilter, Status> {
    for (field, value) in [
        ("agent_id", &request.agent_id),
        ("resource_id", &request.resource_id),
        ("thread_id", &request.thread_id),
        ("processor_id", &request.processor_id),
    ] {
        id_fits(field, value)?;
    }
    if !request.thread_id.is_empty() && request.resource_id.is_empty() {
        return Err(RunError::invalid("thread_id", "needs resource_id (a thread is its resource's)").into());
    }
    let outcome = match request.outcome.as_str() {
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
        agent_id: request.agent_id.clone(),
        resource_id: request.resource_id.clone(),
        thread_id: request.thread_id.clone(),
        outcome,
        processor_id: request.processor_id.clone(),
        since: bound("since", request.since)?,
        until: bound("until", request.until)?,
    })
}

#[tonic::async_trait]
impl pb::run_service_server::RunService for RunServiceImpl {
    async fn list_runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<pb::ListRunsResponse>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        let filter = filter_of(&request)?;
        if access.admin().is_err() {
            if request.resource_id.is_empty() {
                return Err(RunError::invalid(
                    "resource_id",
                    "is required for a key that is not an admin key",
                )
                .into());
            }
            access.resource(&request.resource_id)?;
        }
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
            runs: page.runs.into_iter().map(|record| record_to_pb(record, false)).collect(),
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
        Ok(Response::new(record_to_pb(record, true)))
    }
}
