-- The reads of an experiment comparison (ingest/duckdb/experiments.py). `{col}` is one of the
-- trace columns of schemas.experiments.COMPARE_BY, never user text; every value is a parameter.

-- name: groups
-- Requests per value of the compared column in the window (auto-detection, unknown-value messages).
SELECT {col} AS grp, count(*) AS n
FROM traces
WHERE ts >= ? AND ts < ? AND {col} IS NOT NULL
GROUP BY grp
ORDER BY n DESC, grp
LIMIT 1000;

-- name: arm_bins
-- One scan for both sides, two grouping sets: per (side, latency bin) the requests, errors,
-- fallbacks and costed requests, added up per side in Python; per side (side_row = 1) the exact
-- latency p50 and p95 (quantile_cont, as the Overview's: compare's point values), and the cost per
-- request's mean and sample variance over every request, one without a recorded cost (no instance
-- served it) counting 0, so that mean × requests is the side's cost sum as the Overview and the
-- series add it up (DuckDB's own streaming var_samp, not sums of squares, which lose digits
-- when the mean dwarfs the spread; favg, compensated, so that the mean does not depend on the order
-- the grouping sets add rows in: a side compared by arm and by version has the same figures). The bin is ingest.experiments.stats.LogBins.index in SQL: 0
-- below lo, then floor(ln(x / lo) / ln(ratio)) + 1, capped at k + 1. Parameters: lo, lo, lo,
-- ln(ratio), k + 1, start, end, a, b. Requests forced onto an arm by header ({forced}: arm_forced, or
-- false in a file from before it) count only in `forced`, on the side's row; the bin of a forced
-- request is -1, so that no other row holds one.
SELECT {col} AS grp,
       CASE WHEN {forced} THEN -1
            WHEN outcome.total_ms < ?::DOUBLE THEN 0
            ELSE least(CAST(floor(ln(greatest(outcome.total_ms, ?::DOUBLE) / ?::DOUBLE) / ?::DOUBLE) AS BIGINT) + 1, ?::BIGINT)
       END AS bin,
       GROUPING(bin) AS side_row,
       count(*) FILTER (WHERE NOT {forced}) AS n,
       count(*) FILTER (WHERE outcome.status = 'error' AND NOT {forced}) AS errors,
       count(*) FILTER (WHERE fallback_triggered AND NOT {forced}) AS fallbacks,
       count(outcome.cost) FILTER (WHERE NOT {forced}) AS cost_n,
       favg(coalesce(outcome.cost, 0)) FILTER (WHERE NOT {forced}) AS mean,
       var_samp(coalesce(outcome.cost, 0)) FILTER (WHERE NOT {forced}) AS var,
       quantile_cont(outcome.total_ms, [0.5, 0.95]) FILTER (WHERE NOT {forced}) AS q,
       count(*) FILTER (WHERE {forced}) AS forced
FROM traces
WHERE ts >= ? AND ts < ? AND {col} IN (?, ?)
GROUP BY GROUPING SETS ((grp, bin), (grp));

-- name: arm_feedback
-- Feedback on each side's traces: all of it (one verdict per request, as the store keeps them), the
-- misroutes (correct = false, as the buckets count them), and the graded feedback naming an expected
-- model, with how much of it went there.
-- Joined on rid_hash as the buckets join. NOT MATERIALIZED: the window's traces stream into the
-- join, the small feedback table is the build side and its keys filter the scan (a MATERIALIZED
-- CTE copied the window's 10M rows first: 300 -> 100 ms at 10M traces). Forced requests' feedback is left
-- out with them. Parameters: start, end, a, b.
WITH t AS NOT MATERIALIZED (
    SELECT rid_hash, {col} AS grp, selected_model
    FROM traces
    WHERE ts >= ? AND ts < ? AND {col} IN (?, ?) AND NOT {forced}
)
SELECT grp, count(*) AS feedback,
       count(*) FILTER (WHERE NOT fb.correct) AS misroutes,
       count(fb.expected_model) AS expected,
       count(*) FILTER (WHERE fb.expected_model = t.selected_model) AS expected_match
FROM feedback fb JOIN t USING (rid_hash)
GROUP BY grp;

-- name: series
-- Each side's figures per time bucket, without the requests forced onto an arm by header ({forced})
-- nor their feedback: the Experiments page's series, counted as its table counts. Read from the
-- traces, not the per-minute rollup (which does not split forced requests): one scan of the two
-- sides' window, as `arm_bins` is, with exact quantiles (as the store's `aggregate` over traces).
-- The window and any narrowing are a TraceFilter's predicates (ingest/duckdb/predicates.py). The
-- feedback joins on rid_hash as `arm_feedback` does (NOT MATERIALIZED: the window's traces stream
-- into the join). A bucket is an integer k counted from `base` (the start of the bucket holding the
-- window's start, in microseconds since the epoch), as in `aggregate`. Parameters, twice: base,
-- width, the filter's values, a, b.
WITH b AS (
    SELECT {col} AS grp, (epoch_us(ts) - ?::BIGINT) // ?::BIGINT AS k, count(*) AS requests,
           count(*) FILTER (WHERE outcome.status = 'error') AS errors,
           count(*) FILTER (WHERE fallback_triggered) AS fallbacks,
           quantile_cont(outcome.total_ms, [0.5, 0.95, 0.99]) AS q,
           coalesce(sum(outcome.cost), 0) AS cost
    FROM traces
    WHERE {where} AND {col} IN (?, ?) AND NOT {forced}
    GROUP BY grp, k
), t AS NOT MATERIALIZED (
    SELECT rid_hash, {col} AS grp, (epoch_us(ts) - ?::BIGINT) // ?::BIGINT AS k
    FROM traces
    WHERE {where} AND {col} IN (?, ?) AND NOT {forced}
), f AS (
    SELECT grp, k, count(*) AS feedback, count(*) FILTER (WHERE NOT fb.correct) AS misroutes
    FROM feedback fb JOIN t USING (rid_hash)
    GROUP BY grp, k
)
SELECT grp, k, requests, errors, fallbacks, q, cost,
       coalesce(feedback, 0) AS feedback, coalesce(misroutes, 0) AS misroutes
FROM b LEFT JOIN f USING (grp, k)
ORDER BY grp, k;
