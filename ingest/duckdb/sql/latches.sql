-- Latch out-intervals, computed where the snapshots are: the reader asks for intervals, never for
-- the hundreds of thousands of snapshots an hour of a busy fleet holds. {where} is the window (and
-- instance) predicate on instance_snapshots; the last parameter is the limit.

-- name: latch_intervals
-- One row per stretch in which an (instance, constraint) latch was out, from the snapshots first
-- seen in the window, in scrape order. A run is a stretch of snapshots in which the latch keeps
-- one state (lag of the state; a change starts a run). An out run starts at its first snapshot and
-- ends at the first snapshot of the next run (none: still out at the last snapshot). The latch's
-- own `since` (when it changed; a snapshot shows the change later) refines a bound when it falls
-- between the previous evaluation and the snapshot. The newest intervals when there are more.
-- Most snapshots change nothing for the latches (a scrape round's state stored once per in-flight
-- count, every round of a healthy fleet): before unnesting, only those are kept in which some latch
-- of the instance changed state or is out (the runs' bounds and the peaks need nothing else),
-- half the time of unnesting them all.
WITH kept AS (
    SELECT instance, scraped_at, seen_at, snapshot_id, latches FROM (
        SELECT instance, scraped_at, seen_at, snapshot_id, latches,
               list_transform(latches, lambda l: struct_pack(c := l."constraint", o := l.out)) AS outs
        FROM instance_snapshots WHERE {where} AND scraped_at IS NOT NULL)
    QUALIFY outs IS DISTINCT FROM lag(outs) OVER (PARTITION BY instance ORDER BY scraped_at, seen_at, snapshot_id)
         OR list_bool_or(list_transform(outs, lambda o: o.o))
),
latch AS (
    SELECT instance, scraped_at AS ts, seen_at, snapshot_id, l."constraint" AS name, l.out AS is_out,
           l.since AS since, l.value AS value
    FROM (SELECT instance, scraped_at, seen_at, snapshot_id, unnest(latches) AS l FROM kept)
),
marked AS (
    SELECT *, CASE WHEN is_out IS DISTINCT FROM lag(is_out) OVER w THEN 1 ELSE 0 END AS changed
    FROM latch
    WINDOW w AS (PARTITION BY instance, name ORDER BY ts, seen_at, snapshot_id)
),
runs AS (
    SELECT *, sum(changed) OVER (PARTITION BY instance, name ORDER BY ts, seen_at, snapshot_id
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS run
    FROM marked
),
bounds AS (
    SELECT instance, name, run, is_out, ts, since,
           lead(ts) OVER p AS next_ts, lead(since) OVER p AS next_since
    FROM runs WHERE changed = 1
    WINDOW p AS (PARTITION BY instance, name ORDER BY run)
),
peaks AS (
    SELECT instance, name, run, max(value) AS peak FROM runs WHERE is_out GROUP BY instance, name, run
),
intervals AS (
    SELECT b.instance, b.name, b.next_ts, b.next_since, p.peak,
           CASE WHEN b.since <= b.ts THEN b.since ELSE b.ts END AS start
    FROM bounds b JOIN peaks p USING (instance, name, run)
    WHERE b.is_out
)
SELECT * FROM (
    SELECT instance, name AS "constraint", start,
           CASE WHEN next_ts IS NULL THEN NULL
                WHEN next_since >= start AND next_since <= next_ts THEN next_since
                ELSE next_ts END AS "end",
           peak
    FROM intervals ORDER BY start DESC, instance, name LIMIT ?
) ORDER BY instance, "constraint", start;

-- name: latch_snapshots
-- How many snapshots the intervals come from.
SELECT count(*) AS n FROM instance_snapshots WHERE {where} AND scraped_at IS NOT NULL;
