-- agentwire schema 2: the writes of a run as functions, so that a durable save is one statement
-- (one round trip, its own transaction, plans cached by the server) instead of a dozen.
--
-- Refusals are raised with agentwire's own SQLSTATEs, read back by the store:
--   AWEMB  the stored vectors are another embedder's (message: the stored `id/dimension`)
--   AWVER  working memory is at another version (message: the version found)
--   AWQUO  a quota would be passed (message: usage before and after, six numbers)

-- Writes working memory at `scope` if its stored version is `expected`; the new version.
CREATE FUNCTION agentwire_write_working_memory(
    p_scope text, p_resource text, p_thread text, p_content text, p_expected bigint, p_now bigint
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    found_version bigint;
    written integer;
BEGIN
    SELECT version INTO found_version FROM working_memory WHERE scope = p_scope FOR UPDATE;
    found_version := coalesce(found_version, 0);
    IF found_version <> p_expected THEN
        RAISE EXCEPTION USING ERRCODE = 'AWVER', MESSAGE = found_version::text;
    END IF;
    -- A first write racing another first write: the loser's insert conflicts and finds it written.
    INSERT INTO working_memory (scope, resource_id, thread_id, content, version, updated_at)
        VALUES (p_scope, p_resource, p_thread, p_content, found_version + 1, p_now)
        ON CONFLICT (scope) DO UPDATE SET content = p_content, version = found_version + 1, updated_at = p_now
        WHERE working_memory.version = found_version;
    GET DIAGNOSTICS written = ROW_COUNT;
    IF written = 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'AWVER', MESSAGE = (found_version + 1)::text;
    END IF;
    RETURN found_version + 1;
END $$;

-- Saves a run: its new messages (those whose id the resource does not hold yet, numbered on
-- from the thread's next seq in the order given), their vectors, its working memory, and the
-- usage they add, checked against the quota (a NULL limit: none).
--
-- Locks, in this order, as every write of a thread: the thread's usage row (`p_shard`), then
-- the thread's row. Other threads' usage is read as committed.
CREATE FUNCTION agentwire_save_run(
    p_resource text, p_thread text, p_shard smallint, p_now bigint,
    p_ids text[], p_records jsonb[], p_sizes bigint[],
    p_embedder text, p_vector_ids text[], p_vectors vector[],
    p_memory_scope text, p_memory_thread text, p_memory_content text, p_memory_expected bigint,
    p_max_threads bigint, p_max_messages bigint, p_max_bytes bigint
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    requested text;
    stored text;
    claimed integer;
    before_threads bigint;
    before_messages bigint;
    before_bytes bigint;
    added_threads integer;
    added_messages bigint;
    added_bytes bigint;
    first_seq bigint;
BEGIN
    IF p_embedder IS NOT NULL THEN
        requested := p_embedder || '/' || vector_dims(p_vectors[1]);
        INSERT INTO meta (key, value) VALUES ('embedder', requested) ON CONFLICT DO NOTHING;
        GET DIAGNOSTICS claimed = ROW_COUNT;
        IF claimed = 1 THEN
            -- The first vectors fix the dimension: the index over them can now be made.
            EXECUTE format('CREATE INDEX IF NOT EXISTS embeddings_hnsw ON embeddings '
                           'USING hnsw ((embedding::vector(%s)) vector_ip_ops)', vector_dims(p_vectors[1]));
        ELSE
            SELECT value INTO stored FROM meta WHERE key = 'embedder';
            IF stored <> requested THEN
                RAISE EXCEPTION USING ERRCODE = 'AWEMB', MESSAGE = stored;
            END IF;
        END IF;
    END IF;

    INSERT INTO resource_usage (resource_id, shard) VALUES (p_resource, p_shard) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM resource_usage WHERE resource_id = p_resource AND shard = p_shard FOR UPDATE;
    SELECT coalesce(sum(threads), 0), coalesce(sum(messages), 0), coalesce(sum(bytes), 0)
        INTO before_threads, before_messages, before_bytes
        FROM resource_usage WHERE resource_id = p_resource;

    INSERT INTO threads (resource_id, id, created_at, updated_at) VALUES (p_resource, p_thread, p_now, p_now)
        ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS added_threads = ROW_COUNT;
    SELECT next_seq INTO first_seq FROM threads WHERE resource_id = p_resource AND id = p_thread FOR UPDATE;

    WITH given AS (
        SELECT * FROM unnest(p_ids, p_records, p_sizes) WITH ORDINALITY AS given (id, record, bytes, n)
    ), fresh AS (
        -- Saving is idempotent: a message the resource holds, or given twice, is stored once.
        SELECT DISTINCT ON (id) id, record, bytes, n FROM given
        WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.resource_id = p_resource AND m.id = given.id)
        ORDER BY id, n
    ), saved AS (
        INSERT INTO messages (resource_id, thread_id, seq, id, record, bytes)
        SELECT p_resource, p_thread, first_seq - 1 + row_number() OVER (ORDER BY n), id, record, bytes FROM fresh
        RETURNING id, seq, bytes
    ), vectors AS (
        INSERT INTO embeddings (resource_id, thread_id, seq, embedding, bytes)
        SELECT p_resource, p_thread, saved.seq, given.embedding, vector_dims(given.embedding) * 4
        FROM unnest(p_vector_ids, p_vectors) AS given (id, embedding) JOIN saved USING (id)
        RETURNING bytes
    )
    SELECT (SELECT count(*) FROM saved),
           (SELECT coalesce(sum(bytes), 0) FROM saved) + (SELECT coalesce(sum(bytes), 0) FROM vectors)
        INTO added_messages, added_bytes;

    IF p_memory_scope IS NOT NULL THEN
        PERFORM agentwire_write_working_memory(
            p_memory_scope, p_resource, p_memory_thread, p_memory_content, p_memory_expected, p_now);
    END IF;

    IF (p_max_threads IS NOT NULL AND added_threads > 0 AND before_threads + added_threads > p_max_threads)
        OR (p_max_messages IS NOT NULL AND added_messages > 0 AND before_messages + added_messages > p_max_messages)
        OR (p_max_bytes IS NOT NULL AND added_bytes > 0 AND before_bytes + added_bytes > p_max_bytes) THEN
        RAISE EXCEPTION USING ERRCODE = 'AWQUO', MESSAGE = format('%s %s %s %s %s %s',
            before_threads, before_messages, before_bytes,
            before_threads + added_threads, before_messages + added_messages, before_bytes + added_bytes);
    END IF;
    IF added_threads > 0 OR added_messages > 0 OR added_bytes > 0 THEN
        UPDATE resource_usage SET threads = threads + added_threads, messages = messages + added_messages,
            bytes = bytes + added_bytes
            WHERE resource_id = p_resource AND shard = p_shard;
    END IF;
    UPDATE threads SET next_seq = first_seq + added_messages, updated_at = p_now
        WHERE resource_id = p_resource AND id = p_thread;
END $$;
