//! A server in this process, on its own runtime and threads, over a temporary data directory
//! (or a kept one, or PostgreSQL): what `agentwire bench` and `agentwire eval` drive over real
//! gRPC.

use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::{ServeOptions, serve};
use crate::config::Config;
use crate::runtime::{Components, Runtime};
use crate::storage::{PgOptions, PgStore, SledStore, Store};

/// A running server; [`InProcess::stop`] ends it and deletes its data when it was temporary.
pub struct InProcess {
    address: String,
    store: Arc<dyn Store>,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
    _data: Option<tempfile::TempDir>,
}

/// Where an in-process server keeps its memory.
enum Backing<'a> {
    /// sled in a temporary directory, deleted when the server stops.
    Temporary,
    /// sled in `store` under this data directory, as `agentwire serve --data-dir` keeps it.
    Kept(&'a Path),
    /// PostgreSQL.
    Postgres(&'a PgOptions),
}

impl InProcess {
    /// Starts a server of the agents in `config` (an `agentwire.toml`) on a loopback port, with a
    /// runtime of two worker threads named `thread_name`.
    pub fn start(config: &str, thread_name: &str) -> Result<InProcess, String> {
        InProcess::start_with(config, thread_name, Backing::Temporary)
    }

    /// [`InProcess::start`] with the store kept in the data directory `data_dir` (opened as
    /// `agentwire serve --data-dir` opens it, and left there when the server stops).
    pub fn start_in(config: &str, thread_name: &str, data_dir: &Path) -> Result<InProcess, String> {
        InProcess::start_with(config, thread_name, Backing::Kept(data_dir))
    }

    /// [`InProcess::start`] with the store in PostgreSQL (its connections made on the server's
    /// runtime, so that their work counts as the server's).
    pub fn start_on_postgres(
        config: &str,
        thread_name: &str,
        postgres: &PgOptions,
    ) -> Result<InProcess, String> {
        InProcess::start_with(config, thread_name, Backing::Postgres(postgres))
    }

    fn start_with(config: &str, thread_name: &str, backing: Backing<'_>) -> Result<InProcess, String> {
        let server_runtime = super::serving_runtime()
            .worker_threads(2)
            .thread_name(thread_name)
            .build()
            .map_err(|error| format!("cannot start the {thread_name} runtime: {error}"))?;
        let open_sled =
            |path: &Path| SledStore::open(path).map_err(|error| format!("cannot open the store: {error}"));
        let (store, data): (Arc<dyn Store>, _) = match backing {
            Backing::Temporary => {
                let data =
                    tempfile::tempdir().map_err(|error| format!("cannot make a data directory: {error}"))?;
                (Arc::new(open_sled(data.path())?), Some(data))
            }
            Backing::Kept(data_dir) => (Arc::new(open_sled(&data_dir.join("store"))?), None),
            Backing::Postgres(options) => (
                Arc::new(
                    server_runtime
                        .block_on(PgStore::connect(options))
                        .map_err(|error| format!("cannot open the PostgreSQL store: {error}"))?,
                ),
                None,
            ),
        };
        let components = Components::builtin().with_store(Arc::clone(&store));
        let config = Config::parse(config).map_err(|error| format!("the config: {error}"))?;
        let agents = Arc::new(Runtime::new(&config, components).map_err(|error| error.to_string())?);
        let listener = server_runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .map_err(|error| format!("cannot listen: {error}"))?;
        let address = listener.local_addr().map_err(|error| error.to_string())?.to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let served = server_runtime.block_on(serve(listener, agents, ServeOptions::default(), async {
                let _ = stopped.await;
            }));
            if let Err(error) = served {
                eprintln!("in-process server: {error}");
            }
        });
        Ok(InProcess { address, store, stop, thread, _data: data })
    }

    /// Where it listens (`127.0.0.1:port`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Its store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Stops it and waits for its thread.
    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}
