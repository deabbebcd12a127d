//! [`Store`] on PostgreSQL: each method as SQL, each write one transaction.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use pgvector::Vector;
use serde_json::Value;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{PgStore, database, runs};
use crate::domain::{Message, ResourceAllowance, RunRecord, RunTally, now_millis};
use crate::storage::{
    CacheScope, DeleteReport, Direction, Hit, MessagePage, NewThread, RecallScope, ResourceUsage, RunFilter,
    RunPage, RunSave, Store, StoreError, StoredMessage, Thread, ThreadPage, ThreadUpdate, VectorQuery,
    WorkingMemoryRecord, WorkingMemoryScope, check_quota, keys,
};

/// Cache writes between two sweeps of expired entries.
pub(super) const CACHE_SWEEP_EVERY: u64 = 1024;

/// `meta` key of the embedder that made the stored vectors (`id/dimension`).
const META_EMBEDDER: &str = "embedder";

const THREAD_COLUMNS: &str = "id, resource_id, title, metadata, created_at, updated_at, next_seq";

type Transaction<'a> = deadpool_postgres::Transaction<'a>;

fn thread_of(row: &Row) -> Thread {
    let metadata = match row.get::<_, Value>("metadata") {
        Value::Object(map) => map,
        _ => Default::default(),
    };
    Thread {
        id: row.get("id"),
        resource_id: row.get("resource_id"),
        title: row.get("title"),
        metadata,
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
        next_seq: row.get::<_, i64>("next_seq") as u64,
    }
}

fn stored_message(row: &Row) -> Result<StoredMessage, StoreError> {
    let message: Message = serde_json::from_value(row.get("record"))
        .map_err(|error| StoreError::Corrupt { tree: "messages", reason: error.to_string() })?;
    Ok(StoredMessage { seq: row.get::<_, i64>("seq") as u64, message })
}

fn seq_cursor(seq: u64) -> String {
    keys::encode_cursor(&seq.to_be_bytes())
}

fn cursor_seq(cursor: &str) -> Option<u64> {
    keys::decode_cursor(cursor).and_then(|bytes| Some(u64::from_be_bytes(bytes.try_into().ok()?)))
}

/// A thread page's cursor: the last thread's creation time and id.
fn thread_cursor(thread: &Thread) -> String {
    let mut bytes = thread.created_at.to_be_bytes().to_vec();
    bytes.extend_from_slice(thread.id.as_bytes());
    keys::encode_cursor(&bytes)
}

fn cursor_thread(cursor: &str) -> Option<(i64, String)> {
    let bytes = keys::decode_cursor(cursor)?;
    let (created_at, id) = bytes.split_first_chunk::<8>()?;
    Some((i64::from_be_bytes(*created_at), String::from_utf8(id.to_vec()).ok()?))
}

/// A page of what a query fetched with `LIMIT limit + 1`: the first `limit` and, when there was
/// more, the cursor of the last one kept (else empty).
fn page<T>(mut items: Vec<T>, limit: usize, cursor_of: impl Fn(&T) -> String) -> (Vec<T>, String) {
    if items.len() <= limit {
        return (items, String::new());
    }
    items.truncate(limit);
    let cursor = items.last().map(cursor_of).unwrap_or_default();
    (items, cursor)
}

fn usage_of(row: &Row) -> ResourceUsage {
    ResourceUsage {
        threads: row.get::<_, i64>("threads") as u64,
        messages: row.get::<_, i64>("messages") as u64,
        bytes: row.get::<_, i64>("bytes") as u64,
    }
}

fn as_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Rows a resource's usage is split in, by thread: saves to different threads of one resource
/// lock different rows, so they never wait on one another's commit.
const USAGE_SHARDS: u64 = 16;

/// A resource's usage as a write sees it: the whole (its thread's row, locked, and the others
/// as committed) and its thread's row.
struct Usage {
    total: ResourceUsage,
    own: ResourceUsage,
    shard: i16,
}

/// A resource's usage summed over its rows.
const USAGE_SUM: &str = "SELECT coalesce(sum(threads), 0)::bigint AS threads, coalesce(sum(messages), 0)::bigint AS messages, \
     coalesce(sum(bytes), 0)::bigint AS bytes FROM resource_usage WHERE resource_id = $1";

/// [`USAGE_SUM`] and whether thread `$2` exists, for a run's quota pre-check; made once.
static USAGE_WITH_THREAD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT usage.*, EXISTS (SELECT 1 FROM threads WHERE resource_id = $1 AND id = $2) AS thread_exists \
         FROM ({USAGE_SUM}) AS usage"
    )
});

/// The row of a resource's usage that `thread_id`'s writes lock.
fn usage_shard(thread_id: &str) -> i16 {
    (crate::domain::fnv1a(&[thread_id.as_bytes()]) % USAGE_SHARDS) as i16
}

/// Locks the usage row of `thread_id`'s shard for the rest of the transaction (made if
/// missing) and reads the resource's usage. Every write of a thread takes this lock first.
/// Writes to other threads of the resource may commit meanwhile: a quota is checked against
/// what is committed, so saves racing one another can take a resource past it by what they add
/// together, never more.
async fn lock_usage(
    transaction: &Transaction<'_>,
    resource_id: &str,
    thread_id: &str,
) -> Result<Usage, StoreError> {
    let shard = usage_shard(thread_id);
    transaction
        .execute(
            "INSERT INTO resource_usage (resource_id, shard) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&resource_id, &shard],
        )
        .await
        .map_err(database)?;
    let own = transaction
        .query_one(
            "SELECT threads, messages, bytes FROM resource_usage WHERE resource_id = $1 AND shard = $2 FOR UPDATE",
            &[&resource_id, &shard],
        )
        .await
        .map_err(database)?;
    let total = transaction.query_one(USAGE_SUM, &[&resource_id]).await.map_err(database)?;
    Ok(Usage { total: usage_of(&total), own: usage_of(&own), shard })
}

/// Writes the locked shard's new usage.
async fn write_usage(
    transaction: &Transaction<'_>,
    resource_id: &str,
    usage: &Usage,
    own: ResourceUsage,
) -> Result<(), StoreError> {
    transaction
        .execute(
            "UPDATE resource_usage SET threads = $3, messages = $4, bytes = $5 WHERE resource_id = $1 AND shard = $2",
            &[&resource_id, &usage.shard, &as_i64(own.threads), &as_i64(own.messages), &as_i64(own.bytes)],
        )
        .await
        .map_err(database)?;
    Ok(())
}

/// A refusal a store function raised (`0002_save_run.sql`): its SQLSTATE and message.
fn raised(error: &tokio_postgres::Error) -> Option<(&str, &str)> {
    let db = error.as_db_error()?;
    db.code().code().starts_with("AW").then(|| (db.code().code(), db.message()))
}

/// The error of a working-memory write to `scope` at `expected_version`.
fn working_memory_error(
    error: tokio_postgres::Error,
    scope: &WorkingMemoryScope,
    expected_version: u64,
) -> StoreError {
    match raised(&error) {
        Some(("AWVER", found)) => StoreError::VersionConflict {
            scope: scope.to_string(),
            expected: expected_version,
            found: found.parse().unwrap_or_default(),
        },
        _ => database(error),
    }
}

/// The error of `save`: a refusal the save function raised as ours, anything else the database's.
fn save_error(error: tokio_postgres::Error, save: &RunSave) -> StoreError {
    let refusal = match raised(&error) {
        Some(("AWEMB", stored)) => {
            let first = save.embeddings.first();
            let requested = first.map(|first| format!("{}/{}", first.embedder, first.vector.len()));
            return StoreError::EmbedderMismatch {
                stored: stored.to_owned(),
                requested: requested.unwrap_or_default(),
            };
        }
        Some(("AWVER", _)) => {
            let (scope, _, expected_version) =
                save.working_memory.as_ref().expect("only a save with working memory");
            return working_memory_error(error, scope, *expected_version);
        }
        Some(("AWQUO", figures)) => figures,
        _ => return database(error),
    };
    let figures: Vec<u64> = refusal.split(' ').filter_map(|figure| figure.parse().ok()).collect();
    let usage =
        |at: usize| ResourceUsage { threads: figures[at], messages: figures[at + 1], bytes: figures[at + 2] };
    if figures.len() != 6 {
        return StoreError::Engine(format!("PostgreSQL refused a save over quota with `{refusal}`"));
    }
    match check_quota(&save.quota, &save.resource_id, usage(0), usage(3)) {
        Err(refused) => refused,
        Ok(()) => {
            StoreError::Engine(format!("PostgreSQL refused a save over quota that is within it: `{refusal}`"))
        }
    }
}

/// Saves a run in one statement (`agentwire_save_run`): its own transaction, committed durably.
async fn save_run(client: &deadpool_postgres::Object, save: &RunSave) -> Result<(), StoreError> {
    let (mut ids, mut records, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
    for message in &save.messages {
        let mut stored = message.clone();
        stored.thread_id.clone_from(&save.thread_id);
        stored.resource_id.clone_from(&save.resource_id);
        let record = serde_json::to_value(&stored).expect("messages serialise");
        sizes.push(serde_json::to_vec(&record).map_or(0, |bytes| bytes.len() as i64));
        ids.push(message.id.as_str());
        records.push(record);
    }
    let embedder = save.embeddings.first().map(|first| first.embedder.as_str());
    let vector_ids: Vec<&str> =
        save.embeddings.iter().map(|embedding| embedding.message_id.as_str()).collect();
    let vectors: Vec<Vector> =
        save.embeddings.iter().map(|embedding| Vector::from(embedding.vector.clone())).collect();
    let (memory_scope, memory_thread, memory_content, memory_expected) = match &save.working_memory {
        Some((scope, content, expected)) => {
            (Some(scope.key()), scope.thread_id(), Some(content.as_str()), Some(as_i64(*expected)))
        }
        None => (None, None, None, None),
    };
    let limit = |limit: Option<u64>| limit.map(as_i64);
    let statement = client
        .prepare_cached(
            "SELECT agentwire_save_run($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
        )
        .await
        .map_err(database)?;
    client
        .execute(
            &statement,
            &[
                &save.resource_id,
                &save.thread_id,
                &usage_shard(&save.thread_id),
                &now_millis(),
                &ids,
                &records,
                &sizes,
                &embedder,
                &vector_ids,
                &vectors,
                &memory_scope,
                &memory_thread,
                &memory_content,
                &memory_expected,
                &limit(save.quota.threads),
                &limit(save.quota.messages),
                &limit(save.quota.bytes),
            ],
        )
        .await
        .map_err(|error| save_error(error, save))?;
    Ok(())
}

/// Deletes a thread within `transaction`, its resource's usage row locked already.
async fn delete_thread_in(
    transaction: &Transaction<'_>,
    resource_id: &str,
    thread_id: &str,
) -> Result<(DeleteReport, ResourceUsage), StoreError> {
    let locked = transaction
        .query_opt(
            "SELECT 1 FROM threads WHERE resource_id = $1 AND id = $2 FOR UPDATE",
            &[&resource_id, &thread_id],
        )
        .await
        .map_err(database)?;
    if locked.is_none() {
        return Err(StoreError::ThreadNotFound(thread_id.to_owned()));
    }
    let counted = |table: &str| {
        format!(
            "SELECT count(*), coalesce(sum(bytes), 0)::bigint FROM {table} WHERE resource_id = $1 AND thread_id = $2"
        )
    };
    let messages =
        transaction.query_one(&counted("messages"), &[&resource_id, &thread_id]).await.map_err(database)?;
    let embeddings =
        transaction.query_one(&counted("embeddings"), &[&resource_id, &thread_id]).await.map_err(database)?;
    let scope =
        WorkingMemoryScope::Thread { resource_id: resource_id.to_owned(), thread_id: thread_id.to_owned() };
    let working_memories = transaction
        .execute("DELETE FROM working_memory WHERE scope = $1", &[&scope.key()])
        .await
        .map_err(database)?;
    transaction
        .execute("DELETE FROM threads WHERE resource_id = $1 AND id = $2", &[&resource_id, &thread_id])
        .await
        .map_err(database)?;
    let cache = CacheScope::Thread { resource_id: resource_id.to_owned(), thread_id: thread_id.to_owned() };
    transaction
        .execute("DELETE FROM response_cache WHERE scope = $1", &[&cache.key()])
        .await
        .map_err(database)?;
    let report = DeleteReport {
        threads: 1,
        messages: messages.get::<_, i64>(0) as u64,
        embeddings: embeddings.get::<_, i64>(0) as u64,
        working_memories,
    };
    let removed = ResourceUsage {
        threads: 1,
        messages: report.messages,
        bytes: (messages.get::<_, i64>(1) + embeddings.get::<_, i64>(1)) as u64,
    };
    Ok((report, removed))
}

impl PgStore {
    /// Runs `write` in a transaction and commits it (durably: `synchronous_commit` is on).
    async fn write<T, F>(&self, write: F) -> Result<T, StoreError>
    where
        F: for<'a> FnOnce(
                &'a Transaction<'a>,
            )
                -> std::pin::Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>
            + Send,
        T: Send,
    {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(database)?;
        let value = match write(&transaction).await {
            Ok(value) => value,
            Err(error) => return self.space.noted(Err(error)),
        };
        self.space.noted(transaction.commit().await.map_err(database).map(|()| value))
    }

    async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached(sql).await.map_err(database)?;
        client.query(&statement, params).await.map_err(database)
    }
}

#[async_trait::async_trait]
impl Store for PgStore {
    async fn save_run(&self, save: RunSave) -> Result<(), StoreError> {
        self.space.noted(save_run(&self.client().await?, &save).await)
    }

    async fn create_thread(&self, new: NewThread) -> Result<Thread, StoreError> {
        let now = now_millis();
        let thread = new.made_at(now);
        self.write(|transaction| {
            Box::pin(async move {
                let usage = lock_usage(transaction, &thread.resource_id, &thread.id).await?;
                let before = usage.total;
                let inserted = transaction
                    .execute(
                        "INSERT INTO threads (resource_id, id, title, metadata, created_at, updated_at) \
                         VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT DO NOTHING",
                        &[
                            &thread.resource_id,
                            &thread.id,
                            &thread.title,
                            &Value::Object(thread.metadata.clone()),
                            &now,
                        ],
                    )
                    .await
                    .map_err(database)?;
                if inserted == 0 {
                    return Err(StoreError::ThreadExists(thread.id.clone()));
                }
                let after = before.plus(ResourceUsage { threads: 1, ..Default::default() });
                check_quota(&new.quota, &thread.resource_id, before, after)?;
                let own = usage.own.plus(ResourceUsage { threads: 1, ..Default::default() });
                write_usage(transaction, &thread.resource_id, &usage, own).await?;
                Ok(thread)
            })
        })
        .await
    }

    async fn get_thread(&self, resource_id: &str, thread_id: &str) -> Result<Option<Thread>, StoreError> {
        let sql = format!("SELECT {THREAD_COLUMNS} FROM threads WHERE resource_id = $1 AND id = $2");
        Ok(self.query(&sql, &[&resource_id, &thread_id]).await?.first().map(thread_of))
    }

    async fn list_threads(
        &self,
        resource_id: &str,
        cursor: &str,
        limit: usize,
    ) -> Result<ThreadPage, StoreError> {
        let after = cursor_thread(cursor);
        let first_page = after.is_none();
        let (created_at, id) = after.unwrap_or((i64::MAX, String::new()));
        let sql = format!(
            "SELECT {THREAD_COLUMNS} FROM threads WHERE resource_id = $1 \
             AND ($4 OR (created_at, id) < ($2, $3)) ORDER BY created_at DESC, id DESC LIMIT $5"
        );
        let rows =
            self.query(&sql, &[&resource_id, &created_at, &id, &first_page, &(limit as i64 + 1)]).await?;
        let (threads, next_cursor) = page(rows.iter().map(thread_of).collect(), limit, thread_cursor);
        Ok(ThreadPage { threads, next_cursor })
    }

    async fn update_thread(
        &self,
        resource_id: &str,
        thread_id: &str,
        update: ThreadUpdate,
    ) -> Result<Thread, StoreError> {
        let sql = format!(
            "UPDATE threads SET title = coalesce($3, title), metadata = coalesce($4, metadata), updated_at = $5 \
             WHERE resource_id = $1 AND id = $2 RETURNING {THREAD_COLUMNS}"
        );
        let metadata = update.metadata.map(Value::Object);
        let rows =
            self.query(&sql, &[&resource_id, &thread_id, &update.title, &metadata, &now_millis()]).await?;
        rows.first().map(thread_of).ok_or_else(|| StoreError::ThreadNotFound(thread_id.to_owned()))
    }

    async fn delete_thread(&self, resource_id: &str, thread_id: &str) -> Result<DeleteReport, StoreError> {
        let (resource_id, thread_id) = (resource_id.to_owned(), thread_id.to_owned());
        self.write(|transaction| {
            Box::pin(async move {
                let usage = lock_usage(transaction, &resource_id, &thread_id).await?;
                let (report, removed) = delete_thread_in(transaction, &resource_id, &thread_id).await?;
                write_usage(transaction, &resource_id, &usage, usage.own.minus(removed)).await?;
                Ok(report)
            })
        })
        .await
    }

    async fn claim_resource(
        &self,
        allowance: &ResourceAllowance,
        resource_id: &str,
    ) -> Result<(), StoreError> {
        // Most writes go to a resource already counted: one read.
        let owned = "SELECT 1 FROM resource_owners WHERE resource_id = $1";
        if !self.query(owned, &[&resource_id]).await?.is_empty() {
            return Ok(());
        }
        let (allowance, resource_id) = (allowance.clone(), resource_id.to_owned());
        self.write(|transaction| {
            Box::pin(async move {
                let key = allowance.key_name.as_str();
                // One claim of a key at a time, across replicas: the count and the insert agree.
                transaction
                    .execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", &[&key])
                    .await
                    .map_err(database)?;
                if !transaction.query(owned, &[&resource_id]).await.map_err(database)?.is_empty() {
                    return Ok(());
                }
                let count: i64 = transaction
                    .query_one("SELECT count(*) FROM resource_owners WHERE key_name = $1", &[&key])
                    .await
                    .map_err(database)?
                    .get(0);
                if count as u64 >= allowance.max_resources {
                    return Err(StoreError::AllowanceExceeded {
                        key_name: allowance.key_name.clone(),
                        resource_id,
                        limit: allowance.max_resources,
                    });
                }
                transaction
                    .execute(
                        "INSERT INTO resource_owners (resource_id, key_name) VALUES ($1, $2) \
                         ON CONFLICT (resource_id) DO NOTHING",
                        &[&resource_id, &key],
                    )
                    .await
                    .map_err(database)?;
                Ok(())
            })
        })
        .await
    }

    async fn delete_resource(&self, resource_id: &str) -> Result<DeleteReport, StoreError> {
        let owned = resource_id.to_owned();
        let report = self
            .write(|transaction| {
                let resource_id = owned.clone();
                Box::pin(async move {
                    transaction
                        .execute(
                            "SELECT 1 FROM resource_usage WHERE resource_id = $1 FOR UPDATE",
                            &[&resource_id],
                        )
                        .await
                        .map_err(database)?;
                    let count = |table: &str| format!("SELECT count(*) FROM {table} WHERE resource_id = $1");
                    let mut report = DeleteReport::default();
                    for (table, field) in [
                        ("threads", &mut report.threads),
                        ("messages", &mut report.messages),
                        ("embeddings", &mut report.embeddings),
                    ] {
                        *field = transaction
                            .query_one(&count(table), &[&resource_id])
                            .await
                            .map_err(database)?
                            .get::<_, i64>(0) as u64;
                    }
                    report.working_memories = transaction
                        .execute("DELETE FROM working_memory WHERE resource_id = $1", &[&resource_id])
                        .await
                        .map_err(database)?;
                    transaction
                        .execute("DELETE FROM threads WHERE resource_id = $1", &[&resource_id])
                        .await
                        .map_err(database)?;
                    let threads_prefix = format!("thread:{}:{resource_id}:", resource_id.len());
                    transaction
                        .execute(
                            "DELETE FROM response_cache WHERE scope = $1 OR starts_with(scope, $2)",
                            &[&CacheScope::Resource(resource_id.clone()).key(), &threads_prefix],
                        )
                        .await
                        .map_err(database)?;
                    for table in ["resource_usage", "run_records", "resource_owners"] {
                        transaction
                            .execute(&format!("DELETE FROM {table} WHERE resource_id = $1"), &[&resource_id])
                            .await
                            .map_err(database)?;
                    }
                    Ok(report)
                })
            })
            .await?;
        self.run_tallies.forget_resource(resource_id);
        Ok(report)
    }

    async fn last_messages(
        &self,
        resource_id: &str,
        thread_id: &str,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = self
            .query(
                "SELECT seq, record FROM messages WHERE resource_id = $1 AND thread_id = $2 ORDER BY seq DESC LIMIT $3",
                &[&resource_id, &thread_id, &(limit as i64)],
            )
            .await?;
        rows.iter().rev().map(stored_message).collect()
    }

    async fn list_messages(
        &self,
        resource_id: &str,
        thread_id: &str,
        direction: Direction,
        cursor: &str,
        limit: usize,
    ) -> Result<MessagePage, StoreError> {
        let after = cursor_seq(cursor);
        let sql = match direction {
            Direction::Forward => {
                "SELECT seq, record FROM messages WHERE resource_id = $1 AND thread_id = $2 AND seq > $3 \
                 ORDER BY seq LIMIT $4"
            }
            Direction::Backward => {
                "SELECT seq, record FROM messages WHERE resource_id = $1 AND thread_id = $2 AND seq < $3 \
                 ORDER BY seq DESC LIMIT $4"
            }
        };
        let bound = match (direction, after) {
            (_, Some(seq)) => as_i64(seq),
            (Direction::Forward, None) => -1,
            (Direction::Backward, None) => i64::MAX,
        };
        let rows = self.query(sql, &[&resource_id, &thread_id, &bound, &(limit as i64 + 1)]).await?;
        let messages = rows.iter().map(stored_message).collect::<Result<Vec<_>, _>>()?;
        let (messages, next_cursor) = page(messages, limit, |last| seq_cursor(last.seq));
        Ok(MessagePage { messages, next_cursor })
    }

    async fn messages_around(
        &self,
        resource_id: &str,
        thread_id: &str,
        seqs: &[u64],
        before: usize,
        after: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let seqs: Vec<i64> = seqs.iter().map(|seq| as_i64(*seq)).collect();
        let rows = self
            .query(
                "SELECT seq, record FROM messages m WHERE resource_id = $1 AND thread_id = $2 \
                 AND EXISTS (SELECT 1 FROM unnest($3::bigint[]) AS hit(seq) \
                             WHERE m.seq BETWEEN hit.seq - $4 AND hit.seq + $5) \
                 ORDER BY seq",
                &[&resource_id, &thread_id, &seqs, &(before as i64), &(after as i64)],
            )
            .await?;
        rows.iter().map(stored_message).collect()
    }

    async fn search(&self, query: VectorQuery) -> Result<Vec<Hit>, StoreError> {
        let stored = self.query("SELECT value FROM meta WHERE key = $1", &[&META_EMBEDDER]).await?;
        let Some(stored) = stored.first().map(|row| row.get::<_, String>(0)) else {
            return Ok(Vec::new());
        };
        let dimension = query.vector.len();
        let requested = format!("{}/{dimension}", query.embedder);
        if stored != requested {
            return Err(StoreError::EmbedderMismatch { stored, requested });
        }
        if query.top_k == 0 {
            return Ok(Vec::new());
        }
        let (resource_id, thread_id) = match &query.scope {
            RecallScope::Resource(resource_id) => (resource_id.as_str(), None),
            RecallScope::Thread { resource_id, thread_id } => {
                (resource_id.as_str(), Some(thread_id.as_str()))
            }
        };
        // The same expression as the HNSW index, so that the planner may use it.
        let sql = format!(
            "SELECT thread_id, seq, score FROM ( \
               SELECT thread_id, seq, -(embedding::vector({dimension}) <#> $1::vector({dimension})) AS score \
               FROM embeddings WHERE resource_id = $2 AND ($3::text IS NULL OR thread_id = $3) \
               ORDER BY embedding::vector({dimension}) <#> $1::vector({dimension}) LIMIT $4 \
             ) best WHERE $5::real IS NULL OR score >= $5 ORDER BY score DESC, thread_id, seq"
        );
        let rows = self
            .query(
                &sql,
                &[
                    &Vector::from(query.vector.clone()),
                    &resource_id,
                    &thread_id,
                    &(query.top_k as i64),
                    &query.threshold,
                ],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| Hit {
                thread_id: row.get(0),
                seq: row.get::<_, i64>(1) as u64,
                score: row.get::<_, f64>(2) as f32,
            })
            .collect())
    }

    async fn get_working_memory(
        &self,
        scope: &WorkingMemoryScope,
    ) -> Result<Option<WorkingMemoryRecord>, StoreError> {
        let rows = self
            .query(
                "SELECT content, version, updated_at FROM working_memory WHERE scope = $1",
                &[&scope.key()],
            )
            .await?;
        Ok(rows.first().map(|row| WorkingMemoryRecord {
            content: row.get(0),
            version: row.get::<_, i64>(1) as u64,
            updated_at: row.get(2),
        }))
    }

    async fn put_working_memory(
        &self,
        scope: &WorkingMemoryScope,
        content: String,
        expected_version: u64,
    ) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached("SELECT agentwire_write_working_memory($1, $2, $3, $4, $5, $6)")
            .await
            .map_err(database)?;
        let row = client
            .query_one(
                &statement,
                &[
                    &scope.key(),
                    &scope.resource_id(),
                    &scope.thread_id(),
                    &content,
                    &as_i64(expected_version),
                    &now_millis(),
                ],
            )
            .await
            .map_err(|error| working_memory_error(error, scope, expected_version))?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    async fn save_run_records(&self, records: Vec<RunRecord>) -> Result<(), StoreError> {
        // A run saved again may have changed: its tally is read again.
        self.run_tallies.forget(records.iter().map(|record| record.run_id.as_str()));
        runs::save(&self.client().await?, &records).await
    }

    async fn list_run_records(
        &self,
        filter: &RunFilter,
        cursor: &str,
        limit: usize,
    ) -> Result<RunPage, StoreError> {
        runs::list(&self.client().await?, filter, cursor, limit).await
    }

    async fn run_tallies(&self, filter: &RunFilter, limit: usize) -> Result<Vec<Arc<RunTally>>, StoreError> {
        runs::tallies(&self.client().await?, &self.run_tallies, filter, limit).await
    }

    async fn get_run_record(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        runs::get(&self.client().await?, run_id).await
    }

    async fn prune_run_records(&self, before: Option<i64>, keep: Option<u64>) -> Result<u64, StoreError> {
        runs::prune(&self.client().await?, before, keep).await
    }

    fn writability(&self) -> Option<tokio::sync::watch::Receiver<crate::storage::Writability>> {
        Some(self.space.subscribe())
    }

    async fn usage(&self, resource_id: &str) -> Result<ResourceUsage, StoreError> {
        let rows = self.query(USAGE_SUM, &[&resource_id]).await?;
        Ok(rows.first().map(usage_of).unwrap_or_default())
    }

    async fn usage_with_thread(
        &self,
        resource_id: &str,
        thread_id: &str,
    ) -> Result<(ResourceUsage, bool), StoreError> {
        let rows = self.query(&USAGE_WITH_THREAD, &[&resource_id, &thread_id]).await?;
        let row = rows.first().ok_or_else(|| StoreError::Engine("a sum returned no row".to_owned()))?;
        Ok((usage_of(row), row.get("thread_exists")))
    }

    async fn cache_get(&self, scope: &CacheScope, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let rows = self
            .query(
                "SELECT value, expires_at FROM response_cache WHERE scope = $1 AND key = $2",
                &[&scope.key(), &key],
            )
            .await?;
        let Some(row) = rows.first() else { return Ok(None) };
        if row.get::<_, i64>(1) <= now_millis() {
            self.query("DELETE FROM response_cache WHERE scope = $1 AND key = $2", &[&scope.key(), &key])
                .await?;
            return Ok(None);
        }
        Ok(Some(row.get(0)))
    }

    async fn cache_put(
        &self,
        scope: &CacheScope,
        key: &str,
        value: Vec<u8>,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        self.query(
            "INSERT INTO response_cache (scope, key, expires_at, value) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (scope, key) DO UPDATE SET expires_at = $3, value = $4",
            &[&scope.key(), &key, &expires_at, &value],
        )
        .await?;
        if self.cache_puts.fetch_add(1, Ordering::Relaxed) % CACHE_SWEEP_EVERY == CACHE_SWEEP_EVERY - 1 {
            self.query("DELETE FROM response_cache WHERE expires_at <= $1", &[&now_millis()]).await?;
        }
        Ok(())
    }
}
