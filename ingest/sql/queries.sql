-- Named read queries of the DuckDB trace store. `{where}` is replaced by a conjunction of fixed,
-- parameterised predicates (ingest/duckdb_reader.py: _PREDICATES); values are always `?`.

-- name: get_trace
SELECT * FROM traces WHERE request_id = ? LIMIT 1;

-- name: search
SELECT request_id, ts, router_version, experiment_arm, rule, query_hash, selected_model,
       selected_instance, fallback_triggered, mode, outcome.status AS outcome_status,
       outcome.http_status AS http_status, latency_ms, outcome.total_ms AS total_ms,
       outcome.cost AS cost, detail
FROM traces
WHERE {where}
ORDER BY ts DESC, request_id DESC
LIMIT ?;

-- name: aggregate
WITH t AS (
    SELECT request_id, to_timestamp(floor(epoch(ts) / ?) * ?) AS start,
           outcome.status AS status, outcome.total_ms AS total_ms, outcome.cost AS cost,
           fallback_triggered
    FROM traces
    WHERE {where}
), b AS (
    SELECT start, count(*) AS requests,
           count(*) FILTER (WHERE status = 'error') AS errors,
           count(*) FILTER (WHERE fallback_triggered) AS fallbacks,
           quantile_cont(total_ms, [0.5, 0.95, 0.99]) AS q,
           coalesce(sum(cost), 0) AS cost
    FROM t GROUP BY start
), f AS (
    SELECT t.start, count(*) AS feedback, count(*) FILTER (WHERE NOT fb.correct) AS misroutes
    FROM feedback fb JOIN t USING (request_id)
    GROUP BY t.start
)
SELECT b.start, b.requests, b.errors, b.fallbacks, b.q, b.cost,
       coalesce(f.feedback, 0) AS feedback, coalesce(f.misroutes, 0) AS misroutes
FROM b LEFT JOIN f USING (start)
ORDER BY b.start;

-- name: traffic
SELECT rule, selected_model AS model, selected_instance AS instance, count(*) AS requests
FROM traces
WHERE {where}
GROUP BY ALL;
