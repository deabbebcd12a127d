-- agentwire schema 4: which API key created each resource, for keys' `max_resources`. A row is
-- written when a key first writes to a resource (under a lock on the key, so that replicas
-- claiming at once count right) and deleted with the resource.

CREATE TABLE resource_owners (
    resource_id text COLLATE "C" PRIMARY KEY,
    key_name text COLLATE "C" NOT NULL
);
CREATE INDEX resource_owners_key ON resource_owners (key_name);
