//! The schema, embedded in the binary and applied at start: numbered steps, all that the
//! database lacks in one transaction, under a transaction-scoped advisory lock so that replicas
//! starting together apply each step once. A database whose schema is newer than this binary
//! knows stops start-up (`SchemaTooNew`): an older binary would misread what a newer one wrote.

use super::database;
use crate::domain::now_millis;
use crate::storage::StoreError;

/// The steps, in order; a step is never edited once released, only followed by another.
const MIGRATIONS: &[&str] = &[
    include_str!("0001_schema.sql"),
    include_str!("0002_save_run.sql"),
    include_str!("0003_run_records.sql"),
    include_str!("0004_resource_owners.sql"),
];

/// The schema version this binary applies and reads.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// The advisory lock migrations hold (`agentwire` in ASCII, as a number).
const MIGRATION_LOCK: i64 = 0x6167_656e_7477_6972;

/// Applies the missing steps; returns the schema version now in the database.
pub(super) async fn migrate(client: &mut deadpool_postgres::Object) -> Result<u32, StoreError> {
    let transaction = client.transaction().await.map_err(database)?;
    transaction.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(database)?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS agentwire_schema (version integer PRIMARY KEY, applied_at bigint NOT NULL)",
        )
        .await
        .map_err(database)?;
    let found: i32 = transaction
        .query_one("SELECT coalesce(max(version), 0) FROM agentwire_schema", &[])
        .await
        .map_err(database)?
        .get(0);
    let found = u32::try_from(found).unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew { found, supported: SCHEMA_VERSION });
    }
    for (version, step) in (1i32..).zip(MIGRATIONS).skip(found as usize) {
        transaction.batch_execute(step).await.map_err(database)?;
        transaction
            .execute("INSERT INTO agentwire_schema VALUES ($1, $2)", &[&version, &now_millis()])
            .await
            .map_err(database)?;
    }
    transaction.commit().await.map_err(database)?;
    Ok(SCHEMA_VERSION)
}
