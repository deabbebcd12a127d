-- agentwire schema 1: what the sled store keeps, as tables.

CREATE EXTENSION IF NOT EXISTS vector;

-- Ids compare byte by byte ("C"), whatever the database's locale: pages keep the order sled gives.

CREATE TABLE threads (
    resource_id text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    title text NOT NULL DEFAULT '',
    metadata jsonb NOT NULL DEFAULT '{}',
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    next_seq bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (resource_id, id)
);
-- ListThreads: a resource's threads, newest first.
CREATE INDEX threads_newest ON threads (resource_id, created_at DESC, id DESC);

CREATE TABLE messages (
    resource_id text COLLATE "C" NOT NULL,
    thread_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    id text COLLATE "C" NOT NULL,
    -- The message as JSON (the same record sled keeps); `bytes` its length, as quotas count it.
    record jsonb NOT NULL,
    bytes bigint NOT NULL,
    PRIMARY KEY (resource_id, thread_id, seq),
    -- Saving is idempotent: a message id is stored once per resource.
    UNIQUE (resource_id, id),
    FOREIGN KEY (resource_id, thread_id) REFERENCES threads ON DELETE CASCADE
);

CREATE TABLE embeddings (
    resource_id text COLLATE "C" NOT NULL,
    thread_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    -- Of the store's one embedder (`meta.embedder`); the HNSW index over it is made when the
    -- first vectors fix the dimension.
    embedding vector NOT NULL,
    bytes bigint NOT NULL,
    PRIMARY KEY (resource_id, thread_id, seq),
    FOREIGN KEY (resource_id, thread_id, seq) REFERENCES messages ON DELETE CASCADE
);

CREATE TABLE working_memory (
    -- `resource:<id>` or `thread:<resource length>:<resource>:<thread>`.
    scope text COLLATE "C" PRIMARY KEY,
    resource_id text COLLATE "C" NOT NULL,
    thread_id text COLLATE "C",
    content text NOT NULL,
    version bigint NOT NULL,
    updated_at bigint NOT NULL
);
CREATE INDEX working_memory_resource ON working_memory (resource_id);

-- What a resource keeps, for quotas, in 16 rows by thread (`shard`): each save and delete locks
-- its thread's row, so writes to different threads of one resource do not wait on each other.
CREATE TABLE resource_usage (
    resource_id text COLLATE "C" NOT NULL,
    shard smallint NOT NULL,
    threads bigint NOT NULL DEFAULT 0,
    messages bigint NOT NULL DEFAULT 0,
    bytes bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (resource_id, shard)
);

CREATE TABLE response_cache (
    scope text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    expires_at bigint NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX response_cache_expiry ON response_cache (expires_at);

CREATE TABLE meta (
    key text COLLATE "C" PRIMARY KEY,
    value text NOT NULL
);
