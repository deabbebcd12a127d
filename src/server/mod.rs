//! The gRPC adapters, and the protobuf types (`pb`): no floor below knows either; the console,
//! the bench and the command line above speak to agentwire through them.
//!
//! Each handler converts the request (`convert`), calls the runtime, and converts back; errors
//! become a `Status` in one place (`status`). Health (`grpc.health.v1`) and reflection (v1 and
//! v1alpha) are served next to the agentwire services so `grpcurl` works with no proto files.

mod agent_service;
mod auth;
mod client_errors;
mod connections;
mod convert;
mod health;
mod in_process;
mod limits;
mod memory_service;
mod metrics_endpoint;
mod processor_service;
mod remote_convert;
mod run_convert;
mod run_service;
mod scheduler;
mod status;
mod step_convert;
pub mod value;

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;

use self::agent_service::AgentServiceImpl;
pub use self::auth::{Auth, AuthError};
pub use self::in_process::InProcess;
pub use self::limits::LimitError;
use self::limits::RunSlots;
use self::memory_service::MemoryServiceImpl;
pub use self::metrics_endpoint::serve_metrics;
use self::processor_service::ProcessorServiceImpl;
use self::run_service::RunServiceImpl;
pub use self::scheduler::serving_runtime;
use crate::config::{Config, ConfigError, LimitsConfig, TlsConfig};
use crate::runtime::Runtime;

/// Generated protobuf types, clients and servers for `agentwire.v1`.
///
/// Public so that tests and Rust callers get a client; inside the crate only `server` uses them.
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod pb {
    tonic::include_proto!("agentwire.v1");

    /// Encoded descriptors of the agentwire protos, served by reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("agentwire_descriptor");
}

/// Options of [`serve`] beyond the runtime.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// The client API keys (none: every caller may use everything).
    pub auth: Auth,
    /// Limits on requests and runs.
    pub limits: LimitsConfig,
    /// TLS (and client certificates) for the port.
    pub tls: Option<tonic::transport::ServerTlsConfig>,
    /// How long a starting server reports the agent service NOT_SERVING while processors that
    /// fail closed have not connected (`[remote] startup_grace_ms`; zero: serve at once).
    pub processor_grace: std::time::Duration,
}

impl ServeOptions {
    /// The options `config` sets; certificate files are read and checked now.
    pub fn from_config(config: &Config) -> Result<ServeOptions, ConfigError> {
        Ok(ServeOptions {
            auth: Auth::from_config(config)?,
            limits: config.limits.clone(),
            tls: config.tls.as_ref().map(|tls| tls_of(config, tls)).transpose()?,
            processor_grace: std::time::Duration::from_millis(config.remote.startup_grace_ms),
        })
    }
}

/// The TLS settings of `[tls]`, checked by building a server with them.
fn tls_of(
    config: &Config,
    tls: &toml::Spanned<TlsConfig>,
) -> Result<tonic::transport::ServerTlsConfig, ConfigError> {
    use tonic::transport::{Certificate, Identity, ServerTlsConfig};
    let read = |path: &str| {
        let path = config.resolve(path);
        std::fs::read(&path).map_err(|source| ConfigError::Read { path: path.display().to_string(), source })
    };
    let settings = tls.get_ref();
    let mut server_tls =
        ServerTlsConfig::new().identity(Identity::from_pem(read(&settings.cert)?, read(&settings.key)?));
    if let Some(ca) = &settings.client_ca {
        server_tls = server_tls.client_ca_root(Certificate::from_pem(read(ca)?));
    }
    tonic::transport::Server::builder()
        .tls_config(server_tls.clone())
        .map_err(|error| config.invalid_at(tls.span().start, format!("tls: {error}")))?;
    Ok(server_tls)
}

/// A client channel to a server at `address` (`host:port`, or a URL), Nagle off — for the
/// command line's client and the bench.
pub async fn connect(address: &str) -> Result<tonic::transport::Channel, ConnectError> {
    let url = if address.contains("://") { address.to_owned() } else { format!("http://{address}") };
    let failed = |reason: &dyn std::fmt::Display| (address.to_owned(), reason.to_string());
    tonic::transport::Channel::from_shared(url)
        .map_err(|error| {
            let (address, reason) = failed(&error);
            ConnectError::BadAddress { address, reason }
        })?
        .tcp_nodelay(true)
        .connect()
        .await
        .map_err(|error| {
            let (address, reason) = failed(&error);
            ConnectError::Unreachable { address, reason }
        })
}

/// Why a client could not connect to a server.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The address is not a valid URI. The caller is at fault.
    #[error("bad address {address}: {reason}")]
    BadAddress {
        /// The address given.
        address: String,
        /// Why it is not one.
        reason: String,
    },
    /// Nothing answered at the address.
    #[error("cannot connect to {address}: {reason}")]
    Unreachable {
        /// The address given.
        address: String,
        /// The transport's error.
        reason: String,
    },
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The descriptors for reflection could not be loaded (a build problem).
    #[error("cannot set up server reflection: {0}")]
    Reflection(String),
    /// The transport failed.
    #[error("grpc transport failed: {0}")]
    Transport(String),
}

/// Serves the runtime on `listener` until `shutdown` resolves, then stops gracefully.
pub async fn serve(
    listener: TcpListener,
    runtime: Arc<Runtime>,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    Services::new(runtime, options).serve(listener, shutdown).await
}

/// The agentwire services over one runtime: what the gRPC port serves, and what the console's
/// gateway calls in-process (the same handlers, so the same keys, scoping and limits).
pub struct Services {
    runtime: Arc<Runtime>,
    routes: tonic::service::Routes,
    tls: Option<tonic::transport::ServerTlsConfig>,
    grace: std::time::Duration,
    processor_grace: std::time::Duration,
    /// `[limits] max_connections`.
    max_connections: usize,
}

impl Services {
    /// The services `options` configure over `runtime`.
    pub fn new(runtime: Arc<Runtime>, options: ServeOptions) -> Services {
        let auth = Arc::new(options.auth);
        let max_request = options.limits.max_request_bytes;
        let memory_service = runtime.store().map(|store| {
            pb::memory_service_server::MemoryServiceServer::new(MemoryServiceImpl::new(
                Arc::clone(store),
                runtime.embedders().clone(),
                Arc::clone(&auth),
                runtime.field_limits(),
            ))
            .max_decoding_message_size(max_request)
        });
        let run_service = runtime.store().map(|store| {
            pb::run_service_server::RunServiceServer::new(RunServiceImpl::new(
                Arc::clone(store),
                Arc::clone(&auth),
                Arc::clone(&runtime),
            ))
            .max_decoding_message_size(max_request)
        });
        let processor_service = pb::processor_service_server::ProcessorServiceServer::new(
            ProcessorServiceImpl::new(Arc::clone(runtime.remote_pool()), Arc::clone(&auth)),
        )
        .max_decoding_message_size(processor_service::MAX_FRAME_BYTES as usize)
        .max_encoding_message_size(processor_service::MAX_FRAME_BYTES as usize);
        let agent_service = pb::agent_service_server::AgentServiceServer::new(AgentServiceImpl::new(
            Arc::clone(&runtime),
            auth,
            RunSlots::new(&options.limits),
            std::time::Duration::from_millis(options.limits.slow_client_ms),
        ))
        .max_decoding_message_size(max_request);
        let mut routes = tonic::service::Routes::builder();
        routes.add_service(agent_service).add_service(processor_service);
        if let Some(memory_service) = memory_service {
            routes.add_service(memory_service);
        }
        if let Some(run_service) = run_service {
            routes.add_service(run_service);
        }
        Services {
            runtime,
            routes: routes.routes(),
            tls: options.tls,
            grace: std::time::Duration::from_millis(options.limits.shutdown_grace_ms),
            processor_grace: options.processor_grace,
            max_connections: options.limits.max_connections,
        }
    }

    /// The agentwire services routed by path (`/agentwire.v1.AgentService/Stream`, ...).
    pub fn routes(&self) -> tonic::service::Routes {
        self.routes.clone()
    }

    /// Serves on `listener`, with health and reflection beside the services, until `shutdown`
    /// resolves; then stops gracefully.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ServeError> {
        let Services { runtime, routes, tls, grace, processor_grace, max_connections } = self;
        let store_writability = runtime.store().and_then(|store| store.writability());
        let pool = Arc::clone(runtime.remote_pool());
        let health_pool = Arc::clone(&pool);
        let has_store = runtime.store().is_some();
        // On shutdown: new runs are refused, runs in flight finish (with their remote processors
        // still connected) within the grace period, then the processor sessions drain — they would
        // otherwise keep tonic's graceful stop waiting forever — and tonic stops.
        let (drained, drained_rx) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            shutdown.await;
            let report = runtime.shut_down(grace).await;
            tracing::info!(in_flight = report.in_flight, stopped = report.stopped, "runs concluded");
            runtime.flush_records().await;
            pool.drain().await;
            let _ = drained.send(());
        };
        // Once drained, connections get CLOSE_GRACE to finish; then they are closed whatever their
        // clients do (idle connections that never spoke HTTP/2, streams nobody reads), so that a
        // shutdown always ends.
        let closed_anyway = async move {
            if drained_rx.await.is_err() {
                return std::future::pending().await;
            }
            tokio::time::sleep(CLOSE_GRACE).await;
            tracing::warn!("connections still open {} ms after the drain: closed", CLOSE_GRACE.as_millis());
        };

        let (health_reporter, health_service) = tonic_health::server::health_reporter();
        health_reporter
            .set_serving::<pb::processor_service_server::ProcessorServiceServer<ProcessorServiceImpl>>()
            .await;
        if has_store {
            health_reporter.set_serving::<pb::run_service_server::RunServiceServer<RunServiceImpl>>().await;
        }
        let readiness = health::Readiness {
            writability: store_writability,
            has_store,
            pool: health_pool,
            grace: processor_grace,
        };
        readiness.report(health_reporter.clone()).await;

        let reflection_v1 = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(|error| ServeError::Reflection(error.to_string()))?;
        let reflection_v1alpha = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1alpha()
            .map_err(|error| ServeError::Reflection(error.to_string()))?;

        let incoming = connections::incoming(listener, max_connections);

        let mut server = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            server = server.tls_config(tls).map_err(|error| ServeError::Transport(error.to_string()))?;
        }
        let serving = server
            .layer(client_errors::ClientErrorsLayer)
            .add_routes(routes)
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .serve_with_incoming_shutdown(incoming, shutdown);
        tokio::select! {
            served = serving => served.map_err(|error| ServeError::Transport(error.to_string())),
            () = closed_anyway => Ok(()),
        }
    }
}

/// How long connections may stay open after a shutdown's drain before they are closed.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);
