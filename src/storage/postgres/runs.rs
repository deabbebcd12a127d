//! Run records in PostgreSQL (`0003_run_records.sql`): the record as JSON beside the columns the
//! list filters on, pages keyed by run id like sled's; saved by one function whose commit
//! does not wait for the WAL flush.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_postgres::types::ToSql;

use super::database;
use crate::domain::{RunRecord, RunTally};
use crate::storage::run_tallies::TallyCache;
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

/// The runs a filter passes, newest first, `$9` at most, after run id `$8`: the statement after
/// `SELECT <columns> `, with its parameters from [`FilterParams`].
const FILTERED: &str = "FROM run_records \
     WHERE ($1::text IS NULL OR agent_id = $1) AND ($2::text IS NULL OR resource_id = $2) \
       AND ($3::text IS NULL OR thread_id = $3) AND ($4::text IS NULL OR outcome = $4) \
       AND ($5::text IS NULL OR $5 = ANY(processors)) \
       AND ($6::bigint IS NULL OR started_at >= $6) AND ($7::bigint IS NULL OR started_at < $7) \
       AND ($8::text IS NULL OR run_id < $8) \
       AND ($10::text[] IS NULL OR agent_id = ANY($10) OR agent_id LIKE ANY($11::text[])) \
     ORDER BY run_id DESC LIMIT $9";

/// The parameters of [`FILTERED`].
struct FilterParams<'a> {
    agent: Option<&'a str>,
    resource: Option<&'a str>,
    thread: Option<&'a str>,
    outcome: Option<&'static str>,
    processor: Option<&'a str>,
    since: Option<i64>,
    until: Option<i64>,
    after: Option<&'a str>,
    limit: i64,
    exact_agents: Option<Vec<&'a str>>,
    agent_prefixes: Option<Vec<String>>,
}

impl<'a> FilterParams<'a> {
    fn of(filter: &'a RunFilter, after: &'a str, limit: usize) -> FilterParams<'a> {
        let given = |value: &'a str| (!value.is_empty()).then_some(value);
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
        FilterParams {
            agent: given(&filter.agent_id),
            resource: given(&filter.resource_id),
            thread: given(&filter.thread_id),
            outcome: filter.outcome.map(|outcome| outcome.as_str()),
            processor: given(&filter.processor_id),
            since: filter.since,
            until: filter.until,
            after: given(after),
            limit: i64::try_from(limit).unwrap_or(i64::MAX),
            exact_agents,
            agent_prefixes,
        }
    }

    /// The rows of `SELECT <columns> FILTERED`.
    async fn query(&self, client: &Client, columns: &str) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let statement =
            client.prepare_cached(&format!("SELECT {columns} {FILTERED}")).await.map_err(database)?;
        let params: [&(dyn ToSql + Sync); 11] = [
            &self.agent,
            &self.resource,
            &self.thread,
            &self.outcome,
            &self.processor,
            &self.since,
            &self.until,
            &self.after,
            &self.limit,
            &self.exact_agents,
            &self.agent_prefixes,
        ];
        client.query(&statement, &params).await.map_err(database)
    }
}

pub(super) async fn list(
    client: &Client,
    filter: &RunFilter,
    cursor: &str,
    limit: usize,
) -> Result<RunPage, StoreError> {
    let rows = FilterParams::of(filter, cursor, limit + 1).query(client, "record").await?;
    let mut runs = rows.iter().map(record_of).collect::<Result<Vec<_>, _>>()?;
    let next_cursor = if runs.len() > limit {
        runs.truncate(limit);
        runs.last().map(|last| last.run_id.clone()).unwrap_or_default()
    } else {
        String::new()
    };
    Ok(RunPage { runs, next_cursor })
}

/// The tallies of the newest `limit` runs `filter` passes: their ids from the table, the
/// records of those not tallied yet in one more query.
pub(super) async fn tallies(
    client: &Client,
    cache: &TallyCache,
    filter: &RunFilter,
    limit: usize,
) -> Result<Vec<Arc<RunTally>>, StoreError> {
    let rows = FilterParams::of(filter, "", limit).query(client, "run_id").await?;
    let ids: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
    let mut known: Vec<Option<Arc<RunTally>>> = ids.iter().map(|run_id| cache.get(run_id)).collect();
    let missing: Vec<&str> = ids
        .iter()
        .zip(&known)
        .filter(|(_, tally)| tally.is_none())
        .map(|(run_id, _)| run_id.as_str())
        .collect();
    if !missing.is_empty() {
        let statement = client
            .prepare_cached("SELECT record FROM run_records WHERE run_id = ANY($1)")
            .await
            .map_err(database)?;
        let mut read: HashMap<String, Arc<RunTally>> = HashMap::new();
        for row in client.query(&statement, &[&missing]).await.map_err(database)? {
            let tally = Arc::new(RunTally::of(&record_of(&row)?));
            cache.keep(Arc::clone(&tally));
            read.insert(tally.run_id.clone(), tally);
        }
        for (run_id, tally) in ids.iter().zip(&mut known) {
            if tally.is_none() {
                *tally = read.remove(run_id);
            }
        }
    }
    // A run deleted between the two queries is left out.
    Ok(known.into_iter().flatten().collect())
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
