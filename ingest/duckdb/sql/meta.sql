-- Bookkeeping of the trace store. The record tables themselves are created from the Arrow
-- schemas derived from schemas/ (ingest/codec/storage_schema.py), never typed here.
CREATE TABLE IF NOT EXISTS routelens_meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS routelens_migrations (
    version    INTEGER NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL,
    statement  VARCHAR NOT NULL
);
