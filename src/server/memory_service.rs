//! `agentwire.v1.MemoryService`: threads, messages and working memory over the store.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::auth::{Access, Auth};
use super::convert::id_fits;
use super::pb;
use super::value::{from_struct, to_struct};
use crate::domain::{FieldLimits, thread_owner};
use crate::memory::embedder::{Embedders, LEXICAL};
use crate::runtime::RunError;
use crate::storage::{
    DeleteReport, Direction, Hit, NewThread, RecallScope, Store, StoreError, Thread, ThreadUpdate,
    VectorQuery, WorkingMemoryScope,
};

/// Page size when a request gives none.
const DEFAULT_PAGE_SIZE: usize = 50;
/// The largest page a request may ask for.
const MAX_PAGE_SIZE: u32 = 1000;
/// Search hits when a request gives no `top_k`.
const DEFAULT_TOP_K: usize = 4;
/// The most search hits a request may ask for.
const MAX_TOP_K: u32 = 100;

/// The memory service over a store.
#[derive(Debug)]
pub(super) struct MemoryServiceImpl {
    store: Arc<dyn Store>,
    /// The embedders a search may embed its query with.
    embedders: Embedders,
    auth: Arc<Auth>,
    /// How large titles, metadata and working memory may be.
    limits: FieldLimits,
}

impl MemoryServiceImpl {
    pub(super) fn new(
        store: Arc<dyn Store>,
        embedders: Embedders,
        auth: Arc<Auth>,
        limits: FieldLimits,
    ) -> MemoryServiceImpl {
        MemoryServiceImpl { store, embedders, auth, limits }
    }

    /// Counts `resource_id` among the resources the caller's key created, when its key has an
    /// allowance: a write that would create one past it is refused.
    async fn claim(&self, access: &Access, resource_id: &str) -> Result<(), Status> {
        if let Some(allowance) = access.allowance() {
            self.store.claim_resource(allowance, resource_id).await?;
        }
        Ok(())
    }

    /// The hits of `query` in `scope`, embedded with the named embedder, or else with the one the
    /// stored vectors were made with (tried with `lexical` first, and switched once when the store
    /// names another).
    async fn search(
        &self,
        query: &str,
        embedder: &str,
        scope: RecallScope,
        top_k: usize,
        threshold: Option<f32>,
    ) -> Result<Vec<Hit>, Status> {
        let mut chosen = match embedder {
            "" => Arc::clone(self.embedders.get(LEXICAL).expect("lexical is built in")),
            name => Arc::clone(self.embedders.get(name).ok_or_else(|| {
                let known: Vec<&str> = self.embedders.names().collect();
                RunError::invalid(
                    "embedder",
                    format!("unknown embedder `{name}` (known: {})", known.join(", ")),
                )
            })?),
        };
        loop {
            let vector = chosen.embed(&[query.to_owned()]).await?.pop().unwrap_or_default();
            let search = VectorQuery {
                scope: scope.clone(),
                embedder: chosen.id().to_owned(),
                vector,
                top_k,
                threshold,
            };
            match self.store.search(search).await {
                Err(StoreError::EmbedderMismatch { stored, .. }) if embedder.is_empty() => {
                    match self.embedders.by_id(&stored) {
                        Some(made_with) if made_with.id() != chosen.id() => chosen = Arc::clone(made_with),
                        _ => {
                            return Err(StoreError::EmbedderMismatch {
                                stored,
                                requested: chosen.id().to_owned(),
                            }
                            .into());
                        }
                    }
                }
                found => return Ok(found?),
            }
        }
    }

    /// The thread `thread_id` of the resource the request names, if the caller may use it.
    async fn owned_thread(
        &self,
        access: &Access,
        thread_id: &str,
        resource_id: &str,
    ) -> Result<Thread, Status> {
        required("thread_id", thread_id)?;
        id_fits("resource_id", resource_id)?;
        let resource_id = thread_owner(thread_id, resource_id);
        access.resource(resource_id)?;
        let thread = self.store.get_thread(resource_id, thread_id).await?;
        Ok(thread.ok_or_else(|| StoreError::ThreadNotFound(thread_id.to_owned()))?)
    }
}

/// A working-memory scope, if the caller may use it.
fn scope_in_reach(access: &Access, scope: &WorkingMemoryScope) -> Result<(), Status> {
    match scope {
        WorkingMemoryScope::Resource(id) | WorkingMemoryScope::Thread { resource_id: id, .. } => {
            Ok(access.resource(id)?)
        }
    }
}

/// `Ok` when an id is given and fits [`crate::domain::MAX_ID_BYTES`].
fn required(field: &str, value: &str) -> Result<(), Status> {
    if value.is_empty() {
        return Err(RunError::invalid(field, "is required").into());
    }
    Ok(id_fits(field, value)?)
}

/// A requested count: 0 means `default`; above `max` is refused, naming `field`.
fn bounded(field: &str, requested: u32, default: usize, max: u32) -> Result<usize, Status> {
    match requested {
        0 => Ok(default),
        count if count > max => {
            Err(RunError::invalid(field, format!("must be at most {max}, got {count}")).into())
        }
        count => Ok(usize::try_from(count).unwrap_or(default)),
    }
}

fn page_size(page_size: u32) -> Result<usize, Status> {
    bounded("page_size", page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
}

/// The scope a request names; `resource_id` is a thread scope's resource.
fn scope_of(scope: Option<pb::WorkingMemoryScope>, resource_id: &str) -> Result<WorkingMemoryScope, Status> {
    use pb::working_memory_scope::Scope;
    match scope.and_then(|scope| scope.scope) {
        Some(Scope::ResourceId(id)) if !id.is_empty() => {
            id_fits("scope.resource_id", &id)?;
            Ok(WorkingMemoryScope::Resource(id))
        }
        Some(Scope::ThreadId(id)) if !id.is_empty() => {
            id_fits("scope.thread_id", &id)?;
            id_fits("resource_id", resource_id)?;
            let resource_id = thread_owner(&id, resource_id).to_owned();
            Ok(WorkingMemoryScope::Thread { resource_id, thread_id: id })
        }
        _ => Err(RunError::invalid("scope", "needs a resource_id or a thread_id").into()),
    }
}

fn scope_to_pb(scope: &WorkingMemoryScope) -> pb::WorkingMemoryScope {
    use pb::working_memory_scope::Scope;
    let scope = match scope {
        WorkingMemoryScope::Resource(id) => Scope::ResourceId(id.clone()),
        WorkingMemoryScope::Thread { thread_id, .. } => Scope::ThreadId(thread_id.clone()),
    };
    pb::WorkingMemoryScope { scope: Some(scope) }
}

impl From<Thread> for pb::Thread {
    fn from(thread: Thread) -> pb::Thread {
        pb::Thread {
            metadata: Some(to_struct(&thread.metadata)),
            id: thread.id,
            resource_id: thread.resource_id,
            title: thread.title,
            created_at: thread.created_at,
            updated_at: thread.updated_at,
            message_count: thread.next_seq,
        }
    }
}

impl From<DeleteReport> for pb::DeleteReport {
    fn from(report: DeleteReport) -> pb::DeleteReport {
        pb::DeleteReport {
            threads: report.threads,
            messages: report.messages,
            embeddings: report.embeddings,
            working_memories: report.working_memories,
        }
    }
}

#[tonic::async_trait]
impl pb::memory_service_server::MemoryService for MemoryServiceImpl {
    async fn create_thread(
        &self,
        request: Request<pb::CreateThreadRequest>,
    ) -> Result<Response<pb::Thread>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        required("resource_id", &request.resource_id)?;
        id_fits("thread_id", &request.thread_id)?;
        access.resource(&request.resource_id)?;
        let new = NewThread {
            id: request.thread_id,
            resource_id: request.resource_id,
            title: request.title,
            metadata: request.metadata.map(from_struct).unwrap_or_default(),
            quota: access.quota(),
        };
        self.limits.title("title", &new.title)?;
        self.limits.metadata("metadata", &new.metadata)?;
        self.claim(&access, &new.resource_id).await?;
        Ok(Response::new(self.store.create_thread(new).await?.into()))
    }

    async fn get_thread(
        &self,
        request: Request<pb::GetThreadRequest>,
    ) -> Result<Response<pb::Thread>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        Ok(Response::new(self.owned_thread(&access, &request.thread_id, &request.resource_id).await?.into()))
    }

    async fn list_threads(
        &self,
        request: Request<pb::ListThreadsRequest>,
    ) -> Result<Response<pb::ListThreadsResponse>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        required("resource_id", &request.resource_id)?;
        access.resource(&request.resource_id)?;
        let limit = page_size(request.page_size)?;
        let page = self.store.list_threads(&request.resource_id, &request.page_token, limit).await?;
        Ok(Response::new(pb::ListThreadsResponse {
            threads: page.threads.into_iter().map(pb::Thread::from).collect(),
            next_page_token: page.next_cursor,
        }))
    }

    async fn update_thread(
        &self,
        request: Request<pb::UpdateThreadRequest>,
    ) -> Result<Response<pb::Thread>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        let thread = self.owned_thread(&access, &request.thread_id, &request.resource_id).await?;
        let update = ThreadUpdate { title: request.title, metadata: request.metadata.map(from_struct) };
        if let Some(title) = &update.title {
            self.limits.title("title", title)?;
        }
        if let Some(metadata) = &update.metadata {
            self.limits.metadata("metadata", metadata)?;
        }
        Ok(Response::new(self.store.update_thread(&thread.resource_id, &thread.id, update).await?.into()))
    }

    async fn delete_thread(
        &self,
        request: Request<pb::DeleteThreadRequest>,
    ) -> Result<Response<pb::DeleteReport>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        let thread = self.owned_thread(&access, &request.thread_id, &request.resource_id).await?;
        Ok(Response::new(self.store.delete_thread(&thread.resource_id, &thread.id).await?.into()))
    }

    async fn list_messages(
        &self,
        request: Request<pb::ListMessagesRequest>,
    ) -> Result<Response<pb::ListMessagesResponse>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        let thread = self.owned_thread(&access, &request.thread_id, &request.resource_id).await?;
        let direction = match request.direction() {
            pb::Direction::Backward => Direction::Backward,
            pb::Direction::Forward | pb::Direction::Unspecified => Direction::Forward,
        };
        let limit = page_size(request.page_size)?;
        let page = self
            .store
            .list_messages(&thread.resource_id, &thread.id, direction, &request.page_token, limit)
            .await?;
        Ok(Response::new(pb::ListMessagesResponse {
            messages: page.messages.into_iter().map(|stored| pb::Message::from(stored.message)).collect(),
            next_page_token: page.next_cursor,
        }))
    }

    async fn get_working_memory(
        &self,
        request: Request<pb::GetWorkingMemoryRequest>,
    ) -> Result<Response<pb::WorkingMemory>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        let scope = scope_of(request.scope, &request.resource_id)?;
        scope_in_reach(&access, &scope)?;
        let record = self.store.get_working_memory(&scope).await?;
        let (content, version, updated_at) =
            record.map(|record| (record.content, record.version, record.updated_at)).unwrap_or_default();
        Ok(Response::new(pb::WorkingMemory {
            scope: Some(scope_to_pb(&scope)),
            content,
            version,
            updated_at,
        }))
    }

    async fn update_working_memory(
        &self,
        request: Request<pb::UpdateWorkingMemoryRequest>,
    ) -> Result<Response<pb::WorkingMemory>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        let scope = scope_of(request.scope, &request.resource_id)?;
        scope_in_reach(&access, &scope)?;
        self.limits.working_memory("content", &request.content)?;
        let (WorkingMemoryScope::Resource(resource_id) | WorkingMemoryScope::Thread { resource_id, .. }) =
            &scope;
        self.claim(&access, resource_id).await?;
        let expected_version = match request.expected_version {
            Some(version) => version,
            None => self.store.get_working_memory(&scope).await?.map_or(0, |record| record.version),
        };
        self.store.put_working_memory(&scope, request.content, expected_version).await?;
        let record = self.store.get_working_memory(&scope).await?.ok_or_else(|| {
            Status::aborted("the working memory was deleted as it was written (its resource or thread went); read it again")
        })?;
        Ok(Response::new(pb::WorkingMemory {
            scope: Some(scope_to_pb(&scope)),
            content: record.content,
            version: record.version,
            updated_at: record.updated_at,
        }))
    }

    async fn search_messages(
        &self,
        request: Request<pb::SearchMessagesRequest>,
    ) -> Result<Response<pb::SearchMessagesResponse>, Status> {
        use pb::search_messages_request::Scope;
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        required("query", &request.query)?;
        let (resource_id, scope) = match request.scope {
            Some(Scope::ResourceId(id)) if !id.is_empty() => (id.clone(), RecallScope::Resource(id)),
            Some(Scope::ThreadId(id)) if !id.is_empty() => {
                id_fits("thread_id", &id)?;
                id_fits("thread_resource_id", &request.thread_resource_id)?;
                let resource_id = thread_owner(&id, &request.thread_resource_id).to_owned();
                (resource_id.clone(), RecallScope::Thread { resource_id, thread_id: id })
            }
            _ => return Err(RunError::invalid("scope", "needs a resource_id or a thread_id").into()),
        };
        access.resource(&resource_id)?;
        let top_k = bounded("top_k", request.top_k, DEFAULT_TOP_K, MAX_TOP_K)?;
        let found = self.search(&request.query, &request.embedder, scope, top_k, request.threshold).await?;
        let mut hits = Vec::new();
        for hit in found {
            let found = self.store.messages_around(&resource_id, &hit.thread_id, &[hit.seq], 0, 0).await?;
            if let Some(stored) = found.into_iter().next() {
                hits.push(pb::SearchHit { message: Some(stored.message.into()), score: hit.score });
            }
        }
        Ok(Response::new(pb::SearchMessagesResponse { hits }))
    }

    async fn delete_resource(
        &self,
        request: Request<pb::DeleteResourceRequest>,
    ) -> Result<Response<pb::DeleteReport>, Status> {
        let access = self.auth.access(&request)?;
        let request = request.into_inner();
        required("resource_id", &request.resource_id)?;
        access.resource(&request.resource_id)?;
        Ok(Response::new(self.store.delete_resource(&request.resource_id).await?.into()))
    }
}
