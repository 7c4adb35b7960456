-- Tables around the `traces` table, whose columns are derived from schemas.DecisionTrace
-- (see ingest/duckdb_store.py); this file holds only what is not derived.
CREATE TABLE IF NOT EXISTS routelens_meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_request_id ON traces (request_id);
