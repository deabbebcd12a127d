-- agentwire schema 3: the records runs leave (`RunRecord` as JSON), with the columns the run
-- list filters on; listed newest first, the run id breaking ties as sled's keys do.

CREATE TABLE run_records (
    run_id text COLLATE "C" PRIMARY KEY,
    started_at bigint NOT NULL,
    agent_id text COLLATE "C" NOT NULL,
    resource_id text COLLATE "C" NOT NULL,
    thread_id text COLLATE "C" NOT NULL,
    outcome text NOT NULL,
    -- The processors of its hook calls, for the filter by processor.
    processors text[] NOT NULL,
    record jsonb NOT NULL
);
CREATE INDEX run_records_newest ON run_records (started_at DESC, run_id);
CREATE INDEX run_records_resource ON run_records (resource_id, started_at DESC, run_id);
