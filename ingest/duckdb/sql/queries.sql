-- Named read queries of the DuckDB trace store. `{where}` is replaced by a conjunction of fixed,
-- parameterised predicates (ingest/duckdb/predicates.py: PREDICATES); values are always `?`.
-- Every query names today's columns: over a file that lacks some (an older one opened read-only),
-- the reader supplies them (ingest/duckdb/file_layout.py).

-- name: get_trace
-- An index scan on traces_request_id_key (unique: at most one row).
SELECT * FROM traces WHERE request_id = ?;

-- name: get_states
-- One `?` per snapshot id: an IN list of parameters is answered from instance_snapshots_id_key,
-- where an OR of equalities or `= ANY(?)` would scan the whole table.
SELECT * FROM instance_snapshots WHERE snapshot_id IN ({marks});

-- name: search
SELECT request_id, ts, router_version, experiment_arm, rule, query_hash, selected_model,
       selected_instance, fallback_triggered, mode, outcome.status AS outcome_status,
       outcome.http_status AS http_status, latency_ms, outcome.total_ms AS total_ms,
       outcome.cost AS cost, detail, shadow, otel_trace_id
FROM traces
WHERE {where}
ORDER BY ts DESC, request_id DESC
LIMIT ?;

-- name: aggregate
-- Two scans of `traces` rather than one shared one: the bucket figures (b) never read request_id,
-- the costliest column to decompress, nor does the misroute join (t, f): it joins on rid_hash,
-- hash(request_id) derived at write time (ingest/duckdb/derived.py), ten times cheaper to scan.
-- Both scans take the same filter, so misroutes honour every field of TraceFilter, and a feedback counts in the
-- bucket of its trace, whatever its own ts. `t` is MATERIALIZED as a fence (with one consumer it
-- streams, nothing is buffered): without it DuckDB pushes the join's probabilistic filter on
-- request_id into the scan and evaluates it before the filter's own predicates, decompressing
-- every request_id even when the filter keeps 3% of the rows.
-- A bucket is an integer k counted from `base`, the start of the first bucket in microseconds
-- since the epoch (the reader passes base and the width): ts >= start >= base, so integer
-- division floors, and no float arithmetic is done per row. A read-only file written before
-- rid_hash existed reads it as hash(request_id) (ingest/duckdb/file_layout.py).
-- Whole sealed minutes of an unfiltered window are read from the rollup instead (ingest/duckdb/rollup.py).
WITH b AS (
    SELECT (epoch_us(ts) - ?::BIGINT) // ?::BIGINT AS k, count(*) AS requests,
           count(*) FILTER (WHERE outcome.status = 'error') AS errors,
           count(*) FILTER (WHERE fallback_triggered) AS fallbacks,
           quantile_cont(outcome.total_ms, [0.5, 0.95, 0.99]) AS q,
           coalesce(sum(outcome.cost), 0) AS cost
    FROM traces
    WHERE {where}
    GROUP BY k
), t AS MATERIALIZED (
    SELECT rid_hash, (epoch_us(ts) - ?::BIGINT) // ?::BIGINT AS k
    FROM traces
    WHERE {where}
), f AS (
    SELECT k, count(*) AS feedback, count(*) FILTER (WHERE NOT fb.correct) AS misroutes
    FROM feedback fb JOIN t USING (rid_hash)
    GROUP BY k
)
SELECT k, requests, errors, fallbacks, q, cost,
       coalesce(feedback, 0) AS feedback, coalesce(misroutes, 0) AS misroutes
FROM b LEFT JOIN f USING (k)
ORDER BY k;

-- name: traffic
SELECT rule, selected_model AS model, selected_instance AS instance, count(*) AS requests
FROM traces
WHERE {where}
GROUP BY ALL;

-- name: constraint_keys
-- The distinct values of traces.constraint_hits in the window and how many traces hold each (the
-- reader parses them: ingest/duckdb/derived.py). Rows without the column's value (written around
-- the sink) get it computed here from their candidates (the hits placeholder: sql/constraint_hits.sql);
-- a read-only file written before the column computes it for every row (ingest/duckdb/file_layout.py).
SELECT constraint_hits AS hits, count(*) AS n
FROM traces
WHERE {where} AND constraint_hits IS NOT NULL AND constraint_hits <> '[]'
GROUP BY ALL
UNION ALL
SELECT {hits} AS hits, count(*) AS n
FROM traces
WHERE {where} AND constraint_hits IS NULL
GROUP BY ALL;

-- name: misroute_feedback
-- The newest feedback saying the routing was wrong, a page at a time (keyset on ts, feedback_id):
-- a few hundred rows of the small feedback table. `{after}` is TRUE or the fixed keyset predicate.
SELECT request_id, ts, feedback_id, expected_model, expected_class, source
FROM feedback
WHERE NOT correct AND {after}
ORDER BY ts DESC, feedback_id DESC
LIMIT ?;

-- name: misroute_traces
-- The traces of one page of that feedback that match the filter: one `?` per id, answered from
-- traces_request_id_key (about 70 µs an id) instead of scanning every request_id of the window.
SELECT request_id, ts AS trace_ts, selected_model, selected_instance, rule
FROM traces
WHERE request_id IN ({marks}) AND {where};

-- name: misroutes
-- The same in one join, when the filter keeps too few of the newest misroutes for the pages above
-- to fill the limit: scans the request_id of every trace in the window.
-- Feedback saying the routing was wrong, joined to its trace; the filter applies to the trace.
SELECT f.request_id, f.ts, t.ts AS trace_ts, t.selected_model, t.selected_instance, t.rule,
       f.expected_model, f.expected_class, f.source
FROM feedback f
JOIN (SELECT request_id, ts, selected_model, selected_instance, rule FROM traces WHERE {where}) t
  USING (request_id)
WHERE NOT f.correct
ORDER BY f.ts DESC, f.feedback_id DESC
LIMIT ?;
