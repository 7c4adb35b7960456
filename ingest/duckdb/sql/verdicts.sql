-- One verdict per request id (ingest/duckdb/schema.py, ingest/duckdb/sink.py): the feedback table holds at
-- most one row per request_id (feedback_request_id_key, sql/indexes.sql). A file written before the rule may
-- hold more (a gateway restarted, a file imported, two gateways on one store): opened read-write, it keeps
-- the earliest verdict of each request (by ts, then feedback_id) and moves the later ones to quarantine,
-- each with its reason and its fields as JSON, before the index is created. The `?`s are the time of the
-- migration, then the reason's words before and after the request id (every store's words:
-- ingest.record_sink.verdict_reason_parts). The quarantined `raw` is the verdict as the sink quarantines one: the model's fields,
-- `ts` in ISO 8601 UTC (DuckDB's own text, `2026-12-07 08:57:25.64+00`, is no time the model reads), without
-- the store's feedback_id (the sink's shows it redacted) or rid_hash.

-- name: duplicates
SELECT count(*) - count(DISTINCT request_id) AS n FROM feedback;

-- name: quarantine_later
INSERT INTO quarantine BY NAME
SELECT md5('verdict' || l.feedback_id)[:24] AS quarantine_id, ?::TIMESTAMPTZ AS ts, 'feedback' AS kind,
       'migration' AS source,
       ?::VARCHAR || l.request_id || ?::VARCHAR AS reason,
       l.request_id, NULL AS line, v.raw, strlen(v.raw) AS raw_bytes, sha256(v.raw) AS raw_sha256
FROM (SELECT * FROM feedback
      QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY ts, feedback_id) > 1) AS l,
     LATERAL (SELECT CAST(to_json(f) AS VARCHAR) AS raw
              FROM (SELECT l.* EXCLUDE (feedback_id, rid_hash)
                               REPLACE (strftime(l.ts, '%Y-%m-%dT%H:%M:%S.%fZ') AS ts)) AS f) AS v;

-- name: delete_later
DELETE FROM feedback WHERE feedback_id IN (
    SELECT feedback_id FROM feedback
    QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY ts, feedback_id) > 1);

-- name: reset_rollup
-- The sealed minutes counted the verdicts moved out: they are rolled up again from the traces when the
-- store opens (ingest/duckdb/rollup.py seals every minute from the first trace on).
DELETE FROM traffic_minutes;

-- name: reset_through
DELETE FROM routelens_meta WHERE key = 'rollup_through';
