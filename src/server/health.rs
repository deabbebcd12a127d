//! Health per service, for load balancers and readiness probes: `agentwire.v1.AgentService`
//! serves once the store takes writes and — on a server starting up — an instance of every
//! remote processor that fails closed has connected (or the startup grace has passed, after
//! which runs follow each processor's failure policy); `agentwire.v1.MemoryService` serves while
//! the store takes writes. The server itself (`""`) stays SERVING while it runs.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tonic::server::NamedService;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use super::agent_service::AgentServiceImpl;
use super::memory_service::MemoryServiceImpl;
use super::pb;
use crate::remote::RemotePool;
use crate::storage::Writability;

type Agents = pb::agent_service_server::AgentServiceServer<AgentServiceImpl>;
type Memory = pb::memory_service_server::MemoryServiceServer<MemoryServiceImpl>;

/// How often a starting server looks for its processors.
const PROCESSORS_EVERY: Duration = Duration::from_millis(50);

/// What the services' health follows.
pub(super) struct Readiness {
    /// The store's writability, when the store reports one.
    pub(super) writability: Option<watch::Receiver<Writability>>,
    /// Whether the server has a store (and so a memory service).
    pub(super) has_store: bool,
    /// The remote processors.
    pub(super) pool: Arc<RemotePool>,
    /// How long a starting server waits for its processors (`[remote] startup_grace_ms`).
    pub(super) grace: Duration,
}

impl Readiness {
    /// Sets every service's health now, then keeps it in step from a task of its own.
    pub(super) async fn report(mut self, health: HealthReporter) {
        let until = Instant::now() + self.grace;
        let mut processors_ready = self.processors_ready(until);
        self.set(&health, processors_ready).await;
        tokio::spawn(async move {
            loop {
                let writability_changed = async {
                    match &mut self.writability {
                        Some(writability) => writability.changed().await.is_ok(),
                        None => std::future::pending().await,
                    }
                };
                if processors_ready {
                    if !writability_changed.await {
                        return;
                    }
                } else {
                    tokio::select! {
                        changed = writability_changed => if !changed { return },
                        () = tokio::time::sleep(PROCESSORS_EVERY) => {}
                    }
                    processors_ready = self.processors_ready(until);
                }
                self.set(&health, processors_ready).await;
            }
        });
    }

    /// True once every processor runs cannot do without has an instance, or `until` passed
    /// (logged once either way).
    fn processors_ready(&self, until: Instant) -> bool {
        let missing = self.pool.missing();
        if missing.is_empty() {
            return true;
        }
        if Instant::now() >= until {
            tracing::warn!(
                ?missing,
                grace_ms = self.grace.as_millis(),
                "serving although processors that fail closed have not connected ([remote] startup_grace_ms)"
            );
            return true;
        }
        false
    }

    async fn set(&mut self, health: &HealthReporter, processors_ready: bool) {
        let writable = self
            .writability
            .as_mut()
            .is_none_or(|writability| writability.borrow_and_update().check().is_ok());
        let status = |serving: bool| if serving { ServingStatus::Serving } else { ServingStatus::NotServing };
        health.set_service_status(<Agents as NamedService>::NAME, status(writable && processors_ready)).await;
        if self.has_store {
            health.set_service_status(<Memory as NamedService>::NAME, status(writable)).await;
        }
    }
}
