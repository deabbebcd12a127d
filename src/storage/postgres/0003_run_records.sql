-- agentwire schema 3: the records runs leave (`RunRecord` as JSON), with the columns the run
-- list filters on; listed newest first by run id (UUIDv7: in the order runs began), as sled does.

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
CREATE INDEX run_records_resource ON run_records (resource_id, run_id);
CREATE INDEX run_records_started ON run_records (started_at);

-- Saves run records (a record already kept is replaced). Its commit does not wait for the WAL
-- flush (`synchronous_commit` off for this transaction only): records are operators' data, and
-- one durable commit per batch of them cost as much as the runs' own saves. A crash of the
-- database loses at most the records of its last fraction of a second.
CREATE FUNCTION agentwire_save_run_records(
    p_ids text[], p_started bigint[], p_agents text[], p_resources text[], p_threads text[],
    p_outcomes text[], p_processors jsonb[], p_records jsonb[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO run_records (run_id, started_at, agent_id, resource_id, thread_id, outcome, processors, record)
    SELECT id, started, agent, resource, thread, outcome,
           ARRAY(SELECT jsonb_array_elements_text(processors)), record
    FROM unnest(p_ids, p_started, p_agents, p_resources, p_threads, p_outcomes, p_processors, p_records)
         AS given (id, started, agent, resource, thread, outcome, processors, record)
    ON CONFLICT (run_id) DO UPDATE SET started_at = excluded.started_at, agent_id = excluded.agent_id,
        resource_id = excluded.resource_id, thread_id = excluded.thread_id, outcome = excluded.outcome,
        processors = excluded.processors, record = excluded.record;
END $$;
