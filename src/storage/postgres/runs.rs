//! Run records in PostgreSQL (`0003_run_records.sql`): the record as JSON beside the columns the
//! list filters on, pages keyed by (start, run id) like sled's.

use tokio_postgres::types::ToSql;

use super::database;
use crate::domain::RunRecord;
use crate::storage::{RunFilter, RunPage, StoreError};

type Client = deadpool_postgres::Object;

fn record_of(row: &tokio_postgres::Row) -> Result<RunRecord, StoreError> {
    serde_json::from_value(row.get(0))
        .map_err(|error| StoreError::Corrupt { tree: "run_records", reason: error.to_string() })
}

fn cursor_of(record: &RunRecord) -> String {
    format!("{}:{}", record.started_at, record.run_id)
}

fn parse_cursor(cursor: &str) -> Option<(i64, &str)> {
    let (started_at, run_id) = cursor.split_once(':')?;
    Some((started_at.parse().ok()?, run_id))
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
        .prepare_cached(
            "INSERT INTO run_records (run_id, started_at, agent_id, resource_id, thread_id, outcome, processors, record) \
             SELECT id, started, agent, resource, thread, outcome, \
                    ARRAY(SELECT jsonb_array_elements_text(processors)), record \
             FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $8::jsonb[]) \
                  AS given (id, started, agent, resource, thread, outcome, processors, record) \
             ON CONFLICT (run_id) DO UPDATE SET started_at = excluded.started_at, agent_id = excluded.agent_id, \
                resource_id = excluded.resource_id, thread_id = excluded.thread_id, outcome = excluded.outcome, \
                processors = excluded.processors, record = excluded.record",
        )
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
    let (after_start, after_id) =
        parse_cursor(cursor).map_or((None, None), |(start, id)| (Some(start), Some(id)));
    let empty = |value: &str| (!value.is_empty()).then(|| value.to_owned());
    let (agent, resource, thread, processor) = (
        empty(&filter.agent_id),
        empty(&filter.resource_id),
        empty(&filter.thread_id),
        empty(&filter.processor_id),
    );
    let outcome = filter.outcome.map(|outcome| outcome.as_str());
    let statement = client
        .prepare_cached(
            "SELECT record FROM run_records \
             WHERE ($1::text IS NULL OR agent_id = $1) AND ($2::text IS NULL OR resource_id = $2) \
               AND ($3::text IS NULL OR thread_id = $3) AND ($4::text IS NULL OR outcome = $4) \
               AND ($5::text IS NULL OR $5 = ANY(processors)) \
               AND ($6::bigint IS NULL OR started_at >= $6) AND ($7::bigint IS NULL OR started_at < $7) \
               AND ($8::bigint IS NULL OR started_at < $8 OR (started_at = $8 AND run_id > $9)) \
             ORDER BY started_at DESC, run_id LIMIT $10",
        )
        .await
        .map_err(database)?;
    let params: [&(dyn ToSql + Sync); 10] = [
        &agent,
        &resource,
        &thread,
        &outcome,
        &processor,
        &filter.since,
        &filter.until,
        &after_start,
        &after_id,
        &(limit as i64 + 1),
    ];
    let rows = client.query(&statement, &params).await.map_err(database)?;
    let mut runs = rows.iter().map(record_of).collect::<Result<Vec<_>, _>>()?;
    let next_cursor = if runs.len() > limit {
        runs.truncate(limit);
        runs.last().map(cursor_of).unwrap_or_default()
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
                 ORDER BY started_at DESC, run_id OFFSET $1)",
                &[&(keep as i64)],
            )
            .await
            .map_err(database)?;
    }
    Ok(deleted)
}
