//! A fresh PostgreSQL database per test, on the server `scripts/test` starts
//! (`scripts/postgres`) and names in `AGENTWIRE_TEST_POSTGRES_URL`; with
//! `AGENTWIRE_TEST_STORE=postgres`, every [`TestServer`](super::TestServer) keeps its memory
//! there instead of in sled (`scripts/test` runs the memory tests so a second time).

use std::time::Duration;

use agentwire::storage::{PgOptions, PgStore};

/// The variable naming the test server's URL (its `postgres` database).
pub const URL_ENV: &str = "AGENTWIRE_TEST_POSTGRES_URL";

/// Whether test servers keep their memory in PostgreSQL (`AGENTWIRE_TEST_STORE=postgres`).
pub fn servers_use_postgres() -> bool {
    std::env::var("AGENTWIRE_TEST_STORE").is_ok_and(|store| store == "postgres")
}

/// The store of a test server whose data directory is `data_dir`: one database per directory,
/// so that a server restarted on the same directory finds its data again.
pub async fn store_for(data_dir: &std::path::Path) -> PgStore {
    let admin =
        std::env::var(URL_ENV).unwrap_or_else(|_| panic!("AGENTWIRE_TEST_STORE=postgres needs {URL_ENV}"));
    let name =
        format!("aw_dir_{:016x}", agentwire::domain::fnv1a(&[data_dir.as_os_str().as_encoded_bytes()]));
    connect(&database(&admin, &name).await).await
}

/// The URL of the database `name` on the test server at `admin`, made if it is not there.
async fn database(admin: &str, name: &str) -> String {
    let (client, connection) =
        tokio_postgres::connect(admin, tokio_postgres::NoTls).await.expect("the test PostgreSQL answers");
    tokio::spawn(connection);
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await
        .expect("pg_database");
    if exists.is_none() {
        client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("a test database");
    }
    let (base, _) = admin.rsplit_once('/').expect("the URL names a database");
    format!("{base}/{name}")
}

/// The URL of a new, empty database; `None` with a notice when no test PostgreSQL is configured
/// (in CI, where `scripts/test` always starts one, a missing one fails the test instead).
pub async fn fresh_database() -> Option<String> {
    let Ok(admin) = std::env::var(URL_ENV) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{URL_ENV} is not set: scripts/test starts PostgreSQL for the tests"
        );
        eprintln!("{URL_ENV} is not set: the PostgreSQL half of this test is skipped (scripts/test sets it)");
        return None;
    };
    Some(database(&admin, &format!("aw_{}", uuid::Uuid::now_v7().simple())).await)
}

/// A store on `url`, as a server opens it.
pub async fn connect(url: &str) -> PgStore {
    let options = PgOptions {
        url: url.to_owned(),
        pool_size: 8,
        statement_timeout: Duration::from_secs(10),
        ef_search: 100,
        ca_file: None,
    };
    PgStore::connect(&options).await.expect("the PostgreSQL store opens")
}

/// A store on a fresh database, when there is a test PostgreSQL.
pub async fn fresh_store() -> Option<(String, PgStore)> {
    let url = fresh_database().await?;
    let store = connect(&url).await;
    Some((url, store))
}
