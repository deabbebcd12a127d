//! [`PgStore`]: the store in PostgreSQL with pgvector, for deployments of several replicas.
//!
//! The tables mirror sled's trees (`0001_schema.sql`). Every [`Store`](super::Store) write is
//! one transaction, committed with `synchronous_commit = on` before it returns; a write of a
//! thread locks its row of the resource's usage (one of 16, by thread) first, then the thread's
//! row, so that concurrent saves from any number of replicas serialise per thread (a thread's
//! messages get consecutive seqs), saves to other threads go on in parallel, and nothing
//! deadlocks. A run's save is one statement, a function of schema 2 (`0002_save_run.sql`), so
//! that a durable run costs the database one round trip. Semantic recall runs in the database: an HNSW index
//! over the embeddings, made when the first vectors fix the embedder and dimension.

mod migrations;
mod out_of_space;
mod runs;
mod store;
mod tls;

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;

pub use self::migrations::SCHEMA_VERSION;
use super::StoreError;
use super::run_tallies::TallyCache;

/// How to reach the database.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// A libpq connection URL or key=value string (`postgres://user:pass@host:5432/db`).
    pub url: String,
    /// Connections kept open at most.
    pub pool_size: usize,
    /// Longest a statement may run before the database cancels it.
    pub statement_timeout: Duration,
    /// Candidates an HNSW search keeps (`hnsw.ef_search`).
    pub ef_search: u32,
    /// PEM certificates of the CAs the server's certificate must chain to; none: the system's.
    pub ca_file: Option<std::path::PathBuf>,
}

/// The store, in PostgreSQL. Cheap to clone.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// Cache writes so far: every [`store::CACHE_SWEEP_EVERY`]th sweeps out expired entries.
    cache_puts: std::sync::Arc<AtomicU64>,
    /// Whether writes are refused after the database ran out of space.
    space: out_of_space::SpaceWatch,
    /// The newest runs' tallies, read from their records once.
    run_tallies: std::sync::Arc<TallyCache>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("PgStore").field("pool", &self.pool.status()).finish()
    }
}

impl PgStore {
    /// Connects, applies the schema migrations this binary has and the database lacks, and
    /// checks a connection works. A database with a newer schema is refused.
    pub async fn connect(options: &PgOptions) -> Result<PgStore, StoreError> {
        let mut config: tokio_postgres::Config = options.url.parse().map_err(|error| {
            StoreError::Unavailable(format!("the PostgreSQL URL does not parse: {}", with_causes(&error)))
        })?;
        // Every write is durable when it returns, whatever the server's default; no statement
        // holds a connection longer than the timeout; a filtered HNSW search goes on until it
        // has its top k.
        config.options(format!(
            "-c synchronous_commit=on -c statement_timeout={} -c hnsw.iterative_scan=relaxed_order \
             -c hnsw.ef_search={}",
            options.statement_timeout.as_millis().max(1),
            options.ef_search.clamp(1, 1000)
        ));
        config.application_name("agentwire");
        config.connect_timeout(Duration::from_secs(10));
        let tls = tls::connector(options.ca_file.as_deref())?;
        let manager =
            Manager::from_config(config, tls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .wait_timeout(Some(options.statement_timeout.max(Duration::from_secs(1))))
            .create_timeout(Some(Duration::from_secs(10)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|error| StoreError::Unavailable(format!("cannot build the connection pool: {error}")))?;
        let store = PgStore {
            pool,
            cache_puts: Default::default(),
            space: Default::default(),
            run_tallies: Default::default(),
        };
        let mut client = store.client().await?;
        migrations::migrate(&mut client).await?;
        Ok(store)
    }

    /// A connection of the pool.
    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|error| match error {
            deadpool_postgres::PoolError::Backend(error) => database(error),
            other => StoreError::Unavailable(format!("no PostgreSQL connection: {other}")),
        })
    }
}

/// A database error as ours: the connection or the server gone, or a statement cancelled by
/// its timeout, make the store unavailable (retry later); anything else is the engine failing.
fn database(error: tokio_postgres::Error) -> StoreError {
    let Some(db) = error.as_db_error() else {
        return StoreError::Unavailable(format!("PostgreSQL: {}", with_causes(&error)));
    };
    let code = db.code();
    if *code == SqlState::QUERY_CANCELED {
        return StoreError::Unavailable(format!("PostgreSQL cancelled a statement: {}", db.message()));
    }
    if code.code().starts_with("53") && *code != SqlState::TOO_MANY_CONNECTIONS {
        return StoreError::OutOfSpace(format!(
            "PostgreSQL is out of space: {} ({}); nothing was written",
            db.message(),
            code.code()
        ));
    }
    if code.code().starts_with("08")
        || code.code().starts_with("57P")
        || *code == SqlState::TOO_MANY_CONNECTIONS
    {
        return StoreError::Unavailable(format!("PostgreSQL: {}", db.message()));
    }
    StoreError::Engine(format!("PostgreSQL: {} ({})", db.message(), code.code()))
}

/// An error and its causes: "error performing TLS handshake" alone does not say the certificate.
fn with_causes(error: &tokio_postgres::Error) -> String {
    let mut message = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        message.push_str(&format!(": {inner}"));
        cause = inner.source();
    }
    message
}
