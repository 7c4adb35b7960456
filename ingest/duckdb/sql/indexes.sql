-- One unique index per record table on its id: point lookups (request_id) and idempotent
-- writes (INSERT OR IGNORE: a record delivered twice is stored once). Feedback also holds one verdict per
-- request id (the sink quarantines a later one: ingest/duckdb/sink.py; an older file's are moved on open:
-- sql/verdicts.sql).
CREATE UNIQUE INDEX IF NOT EXISTS traces_request_id_key ON traces (request_id);
CREATE UNIQUE INDEX IF NOT EXISTS instance_snapshots_id_key ON instance_snapshots (snapshot_id);
CREATE UNIQUE INDEX IF NOT EXISTS probe_results_id_key ON probe_results (probe_id);
CREATE UNIQUE INDEX IF NOT EXISTS router_events_id_key ON router_events (event_id);
CREATE UNIQUE INDEX IF NOT EXISTS feedback_id_key ON feedback (feedback_id);
CREATE UNIQUE INDEX IF NOT EXISTS feedback_request_id_key ON feedback (request_id);
CREATE UNIQUE INDEX IF NOT EXISTS quarantine_id_key ON quarantine (quarantine_id);
CREATE UNIQUE INDEX IF NOT EXISTS policies_hash_key ON policies (policy_hash);
