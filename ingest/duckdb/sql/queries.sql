-- Named read queries of the DuckDB trace store. `{where}` is replaced by a conjunction of fixed,
-- parameterised predicates (ingest/duckdb/reader.py: _PREDICATES); values are always `?`.

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
       outcome.cost AS cost, detail
FROM traces
WHERE {where}
ORDER BY ts DESC, request_id DESC
LIMIT ?;

-- name: aggregate
-- Two scans of `traces` rather than one shared one: the bucket figures (b) never read request_id,
-- the costliest column to decompress; only the misroute join (t, f) does. Both scans take the
-- same filter, so misroutes honour every field of TraceFilter, and a feedback counts in the
-- bucket of its trace, whatever its own ts. `t` is MATERIALIZED as a fence (with one consumer it
-- streams, nothing is buffered): without it DuckDB pushes the join's probabilistic filter on
-- request_id into the scan and evaluates it before the filter's own predicates, decompressing
-- every request_id even when the filter keeps 3% of the rows.
-- A bucket is an integer k counted from `base`, the start of the first bucket in microseconds
-- since the epoch (the reader passes base and the width): ts >= start >= base, so integer
-- division floors, and no float arithmetic is done per row.
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
    SELECT request_id, (epoch_us(ts) - ?::BIGINT) // ?::BIGINT AS k
    FROM traces
    WHERE {where}
), f AS (
    SELECT k, count(*) AS feedback, count(*) FILTER (WHERE NOT fb.correct) AS misroutes
    FROM feedback fb JOIN t USING (request_id)
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

-- name: constraint_stats
-- Per (constraint, instance, model): candidates a hard violation removed, those whose would-be
-- total (weight_factor * sum(weight_i * score_terms[i]), NULL without terms) beat the selected
-- candidate's total, those without terms, and soft violations. A candidate counts once per
-- constraint however many of its metrics broke it. Only candidates with violations are unnested
-- past the first step; the weights and the selected total are computed once per trace.
WITH t AS (
    SELECT candidates,
           list_transform(score_weights, lambda w: w.weight) AS w,
           list_filter(candidates, lambda c: c.instance = selected_instance)[1].total AS best
    FROM traces
    WHERE {where} AND list_bool_or(list_transform(candidates, lambda c: len(c.violations) > 0))
), c AS (
    SELECT unnest(candidates) AS c, w, best FROM t
), v AS (
    SELECT c.instance AS instance, c.model AS model, best,
           list_distinct(list_transform(list_filter(c.violations, lambda x: x.severity = 'hard'),
                                        lambda x: x."constraint")) AS hard,
           list_distinct(list_transform(list_filter(c.violations, lambda x: x.severity = 'soft'),
                                        lambda x: x."constraint")) AS soft,
           CASE WHEN len(c.score_terms) > 0 THEN coalesce(c.weight_factor, 1.0)
                * coalesce(list_sum(list_transform(c.score_terms, lambda x, i: x * w[i])), 0.0) END AS would
    FROM c
    WHERE len(c.violations) > 0
), h AS (
    SELECT unnest(hard) AS name, instance, model, 1 AS removed,
           CASE WHEN would > best THEN 1 ELSE 0 END AS decisive,
           CASE WHEN would IS NULL OR best IS NULL THEN 1 ELSE 0 END AS undecided, 0 AS soft
    FROM v
    UNION ALL
    SELECT unnest(soft) AS name, instance, model, 0, 0, 0, 1
    FROM v
)
SELECT name AS "constraint", instance, model, sum(removed) AS removed, sum(decisive) AS decisive,
       sum(undecided) AS undecided, sum(soft) AS soft
FROM h
GROUP BY ALL;

-- name: misroutes
-- Feedback saying the routing was wrong, joined to its trace; the filter applies to the trace.
SELECT f.request_id, f.ts, t.ts AS trace_ts, t.selected_model, t.selected_instance, t.rule,
       f.expected_model, f.expected_class, f.source
FROM feedback f
JOIN (SELECT request_id, ts, selected_model, selected_instance, rule FROM traces WHERE {where}) t
  USING (request_id)
WHERE NOT f.correct
ORDER BY f.ts DESC, f.feedback_id DESC
LIMIT ?;
