-- Recall@3 of the PostgreSQL store's HNSW index against an exact scan (BENCHMARKS.md, issue 19),
-- on the database `agentwire bench --postgres --only S6` seeded:
--
--   psql "$AGENTWIRE_POSTGRES_URL" -v ef=40 -v mix=1.0 -f scripts/pg-recall.sql   # between two texts
--   psql "$AGENTWIRE_POSTGRES_URL" -v ef=40 -v mix=0.3 -f scripts/pg-recall.sql   # near a stored one
--
-- 200 queries, each a stored vector plus `mix` times another; a hit counts when it scores at least
-- the exact third best (ties: the bench's own runs store many identical vectors).
SET hnsw.iterative_scan = relaxed_order;
SET hnsw.ef_search = :ef;
CREATE TEMP TABLE queries AS
  SELECT a.r AS q, (a.embedding::vector(384) + b.embedding::vector(384) * array_fill(:mix::real, ARRAY[384])::vector(384)) AS v
  FROM (SELECT embedding, row_number() OVER (ORDER BY thread_id, seq) r FROM embeddings
        WHERE resource_id = 'recall-100000' ORDER BY thread_id, seq LIMIT 200) a
  JOIN (SELECT embedding, row_number() OVER () r FROM (SELECT embedding FROM embeddings
        WHERE resource_id = 'recall-100000' ORDER BY seq, thread_id OFFSET 50000 LIMIT 200) x) b USING (r);
\timing on
CREATE TEMP TABLE approx AS SELECT q.q, hit.thread_id, hit.seq, hit.s FROM queries q, LATERAL (
  SELECT thread_id, seq, -(embedding::vector(384) <#> q.v) AS s FROM embeddings
  WHERE resource_id = 'recall-100000' ORDER BY embedding::vector(384) <#> q.v LIMIT 3) hit;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
CREATE TEMP TABLE exact AS SELECT q.q, hit.thread_id, hit.seq, hit.s FROM queries q, LATERAL (
  SELECT thread_id, seq, -(embedding::vector(384) <#> q.v) AS s FROM embeddings
  WHERE resource_id = 'recall-100000' ORDER BY embedding::vector(384) <#> q.v LIMIT 3) hit;
\timing off
SELECT round(avg(found)::numeric / 3, 3) AS recall_at_3 FROM (
  SELECT q.q, (SELECT count(*) FROM approx a WHERE a.q = q.q
               AND a.s >= (SELECT min(e.s) FROM exact e WHERE e.q = q.q) - 1e-6) AS found
  FROM queries q) per_query;
