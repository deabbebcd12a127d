//! Run records in PostgreSQL (`0003_run_records.sql`): the record as JSON beside the columns the
//! list filters on, pages keyed by run id like sled's; saved by one function whose commit
//! does not wait for the WAL flush.

use tokio_postgres::types::ToSql;

use super::database;
use crate::domain::RunRecord;
use crate::storage::{RunFilter, RunPage, StoreError};

type Client = deadpool_postgres::Object;

fn record_of(row: &tokio_postgres::Row) -> Result<RunRecord, StoreError> {
    serde_json::from_value(row.get(0))
        .map_err(|error| StoreError::Corrupt { tree: "run_records", reason: error.to_string() })
}

pub(super) async fn save(client: &Client, records: &[RunRecord]) -> Result<(), StoreError> {
    if records.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = records.iter().map(|record| record.run_id.as_str()).collect();
    let started: Vec<i64> = records.iter().map(|record| record.started_at).collect();
    let agents: Vec<&str> = records.iter().map(|record| record.agent_id.as_str()).collect();
    let resources: Vec<&str> = records.iter().map(|record| record.resource_id.as_str()).collect();
    let threads: Vec<&str> = records.iter().map(|record| record.thread_id.as_str()).collect();
    let outcomes: Vec<&str> = records.iter().map(|record| record.outcome.as_str()).collect();
    // A text[] per row goes in as one JSON array each, unpacked in SQL.
    let processors: Vec<serde_json::Value> =
        records.iter().map(|record| serde_json::json!(record.processors())).collect();
    let values: Vec<serde_json::Value> =
        records.iter().map(|record| serde_json::to_value(record).expect("records serialise")).collect();
    let statement = client
        .prepare_cached("SELECT agentwire_save_run_records($1, $2, $3, $4, $5, $6, $7, $8)")
        .await
        .map_err(database)?;
    client
        .execute(
            &statement,
            &[&ids, &started, &agents, &resources, &threads, &outcomes, &processors, &values],
        )
        .await
        .map_err(database)?;
    Ok(())
}

pub(super) async fn list(
    client: &Client,
    filter: &RunFilter,
    cursor: &str,
    limit: usize,
) -> Result<RunPage, StoreError> {
    let after = (!cursor.is_empty()).then_some(cursor);
    let empty = |value: &str| (!value.is_empty()).then(|| value.to_owned());
    let (agent, resource, thread, processor) = (
        empty(&filter.agent_id),
        empty(&filter.resource_id),
        empty(&filter.thread_id),
        empty(&filter.processor_id),
    );
    let outcome = filter.outcome.map(|outcome| outcome.as_str());
    // A key's agents: exact ids, and prefixes as LIKE patterns (their own `%`, `_`, `\` escaped).
    let (exact_agents, agent_prefixes) = match &filter.agents {
        Some(agents) => {
            let (exact, prefixes) = agents.exact_and_prefixes();
            let like = |prefix: &str| {
                let escaped = prefix.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
                format!("{escaped}%")
            };
            (Some(exact), Some(prefixes.into_iter().map(like).collect::<Vec<_>>()))
        }
        None => (None, None),
    };
    let statement = client
        .prepare_cached(
            "SELECT record FROM run_records \
             WHERE ($1::text IS NULL OR agent_id = $1) AND ($2::text IS NULL OR resource_id = $2) \
               AND ($3::text IS NULL OR thread_id = $3) AND ($4::text IS NULL OR outcome = $4) \
               AND ($5::text IS NULL OR $5 = ANY(processors)) \
               AND ($6::bigint IS NULL OR started_at >= $6) AND ($7::bigint IS NULL OR started_at < $7) \
               AND ($8::text IS NULL OR run_id < $8) \
               AND ($10::text[] IS NULL OR agent_id = ANY($10) OR agent_id LIKE ANY($11::text[])) \
             ORDER BY run_id DESC LIMIT $9",
        )
        .await
        .map_err(database)?;
    let params: [&(dyn ToSql + Sync); 11] = [
        &agent,
        &resource,
        &thread,
        &outcome,
        &processor,
        &filter.since,
        &filter.until,
        &after,
        &(limit as i64 + 1),
        &exact_agents,
        &agent_prefixes,
    ];
    let rows = client.query(&statement, &params).await.map_err(database)?;
    let mut runs = rows.iter().map(record_of).collect::<Result<Vec<_>, _>>()?;
    let next_cursor = if runs.len() > limit {
        runs.truncate(limit);
        runs.last().map(|last| last.run_id.clone()).unwrap_or_default()
    } else {
        String::new()
    };
    Ok(RunPage { runs, next_cursor })
}

pub(super) async fn get(client: &Client, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
    let statement =
        client.prepare_cached("SELECT record FROM run_records WHERE run_id = $1").await.map_err(database)?;
    client.query_opt(&statement, &[&run_id]).await.map_err(database)?.as_ref().map(record_of).transpose()
}

pub(super) async fn prune(
    client: &Client,
    before: Option<i64>,
    keep: Option<u64>,
) -> Result<u64, StoreError> {
    let mut deleted = 0;
    if let Some(before) = before {
        deleted += client
            .execute("DELETE FROM run_records WHERE started_at < $1", &[&before])
            .await
            .map_err(database)?;
    }
    if let Some(keep) = keep {
        deleted += client
            .execute(
                "DELETE FROM run_records WHERE run_id IN (SELECT run_id FROM run_records \
                 ORDER BY run_id DESC OFFSET $1)",
                &[&(keep as i64)],
            )
            .await
            .map_err(database)?;
    }
    Ok(deleted)
}
