-- The per-minute rollup of traffic (ingest/duckdb/rollup.py). `{bin}` is the latency bin
-- expression (ingest.experiments.stats.LogBins.index in SQL, fixed text); every value is a `?`.

-- name: create
-- One row per (minute, router_version, experiment_arm, rule, model, instance) sealed, plus rare
-- delta rows (late traces, feedback on sealed traces): readers always sum. `latency` maps a
-- latency bin to its request count.
CREATE TABLE IF NOT EXISTS traffic_minutes (
    minute         TIMESTAMPTZ NOT NULL,
    router_version VARCHAR,
    experiment_arm VARCHAR,
    rule           VARCHAR,
    model          VARCHAR,
    instance       VARCHAR,
    requests       BIGINT NOT NULL,
    errors         BIGINT NOT NULL,
    fallbacks      BIGINT NOT NULL,
    cost           DOUBLE NOT NULL,
    feedback       BIGINT NOT NULL,
    misroutes      BIGINT NOT NULL,
    latency_min    DOUBLE,
    latency_max    DOUBLE,
    latency        MAP(BIGINT, UBIGINT)
);

-- name: roll
-- The rollup rows of the traces of `{source}` in [?, ?) (`traces` when sealing minutes, the
-- sink's `batch` of late traces otherwise), with the feedback already stored on them (joined on
-- hash(request_id), the derived rid_hash). `{fresh}` is TRUE or the predicate keeping only
-- traces not stored yet.
INSERT INTO traffic_minutes
WITH t AS (
    SELECT date_trunc('minute', ts) AS minute, router_version, experiment_arm, rule,
           selected_model AS model, selected_instance AS instance, outcome, fallback_triggered,
           hash(request_id) AS rid_hash, {bin} AS bin
    FROM (SELECT DISTINCT ON (request_id) * FROM {source} WHERE ts >= ? AND ts < ?) AS s
    WHERE {fresh}
), fb AS (
    SELECT rid_hash, count(*) AS n, count(*) FILTER (WHERE NOT correct) AS bad
    FROM feedback
    WHERE rid_hash IN (SELECT rid_hash FROM t)
    GROUP BY rid_hash
)
SELECT minute, router_version, experiment_arm, rule, model, instance,
       count(*) AS requests,
       count(*) FILTER (WHERE outcome.status = 'error') AS errors,
       count(*) FILTER (WHERE fallback_triggered) AS fallbacks,
       coalesce(sum(outcome.cost), 0) AS cost,
       coalesce(sum(fb.n), 0) AS feedback,
       coalesce(sum(fb.bad), 0) AS misroutes,
       min(outcome.total_ms) AS latency_min, max(outcome.total_ms) AS latency_max,
       histogram(bin) AS latency
FROM t LEFT JOIN fb USING (rid_hash)
GROUP BY ALL;

-- name: trace_keys
-- The rollup key of each stored trace named by a `?` (answered from traces_request_id_key).
SELECT request_id, date_trunc('minute', ts) AS minute, router_version, experiment_arm, rule,
       selected_model AS model, selected_instance AS instance
FROM traces
WHERE request_id IN ({marks}) AND ts < ?;

-- name: stored_ids
-- Which of the ids named by a `?` a table already holds (its unique id index answers).
SELECT {id} AS id FROM "{table}" WHERE {id} IN ({marks});

-- name: totals
-- The rollup's figures per bucket k (counted from base, in microseconds) over [?, ?).
SELECT (epoch_us(minute) - ?::BIGINT) // ?::BIGINT AS k, sum(requests) AS requests, sum(errors) AS errors,
       sum(fallbacks) AS fallbacks, sum(cost) AS cost, sum(feedback) AS feedback, sum(misroutes) AS misroutes,
       min(latency_min) AS latency_min, max(latency_max) AS latency_max
FROM traffic_minutes
WHERE {where}
GROUP BY k;

-- name: latency
-- The rollup's latency bins per bucket k over [?, ?).
SELECT k, bin, sum(n) AS n
FROM (SELECT (epoch_us(minute) - ?::BIGINT) // ?::BIGINT AS k, unnest(map_keys(latency)) AS bin,
             unnest(map_values(latency)) AS n
      FROM traffic_minutes
      WHERE {where} AND latency IS NOT NULL)
GROUP BY k, bin;

-- name: raw
-- The same figures straight from the traces (the window's edges and its unsealed tail), per (k, bin).
WITH t AS MATERIALIZED (
    SELECT (epoch_us(ts) - ?::BIGINT) // ?::BIGINT AS k, {bin} AS bin, outcome, fallback_triggered, rid_hash
    FROM traces
    WHERE {where}
), fb AS (
    SELECT rid_hash, count(*) AS n, count(*) FILTER (WHERE NOT correct) AS bad
    FROM feedback
    WHERE rid_hash IN (SELECT rid_hash FROM t)
    GROUP BY rid_hash
)
SELECT k, bin, count(*) AS requests,
       count(*) FILTER (WHERE outcome.status = 'error') AS errors,
       count(*) FILTER (WHERE fallback_triggered) AS fallbacks,
       coalesce(sum(outcome.cost), 0) AS cost,
       coalesce(sum(fb.n), 0) AS feedback,
       coalesce(sum(fb.bad), 0) AS misroutes,
       min(outcome.total_ms) AS latency_min, max(outcome.total_ms) AS latency_max
FROM t LEFT JOIN fb USING (rid_hash)
GROUP BY k, bin;

-- name: traffic
-- Requests per (rule, model, instance) from the rollup over [?, ?).
SELECT rule, model, instance, sum(requests) AS requests
FROM traffic_minutes
WHERE {where}
GROUP BY ALL
HAVING sum(requests) > 0;
