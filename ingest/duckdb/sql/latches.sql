-- Latch out-intervals, computed where the snapshots are: the reader asks for intervals, never for
-- the hundreds of thousands of snapshots an hour of a busy fleet holds. {where} is the window (and
-- instance) predicate on instance_snapshots; the last parameter is the limit.

-- name: latch_intervals
-- One row per stretch in which an (instance, constraint) latch was out, from the snapshots first
-- seen in the window. A latch's `since` is when it last moved, so each (out, since) a snapshot
-- shows is one transition at that time, in whatever order the snapshots were stored: while an
-- instance is unreachable, its rounds and decisions all keep its last good scrape (and the rows
-- written before seen_at was the observation time all carry that one seen_at too), so no order of
-- the rows tells when a latch moved, and a snapshot shows a move after it happened. A latch
-- without a `since` (a producer that does not date its latches) moves when a snapshot first shows
-- it, in the order the snapshots were observed (`seen`: their seen_at; a scrape round's row
-- written before the fix has seen_at = scraped_at and its observation time is scraped_at + age_s).
-- A latch in without a `since` never moved for the router that stored it: no transition, when
-- other rows date that latch (two gateway workers each keep their own latches).
-- Transitions in time order (out before in at one instant) form runs of one state; an out run
-- starts at its first transition and ends at the next run's (none: still out); peak, the highest
-- value shown while out; model, the instance's model in the snapshot that began it. The newest
-- intervals when there are more.
-- Most snapshots change nothing for the latches (a scrape round's state stored once per in-flight
-- count, every round of a healthy fleet): before unnesting, only those are kept in which some latch
-- of the instance is out or shows another (out, since) than in the instance's previous snapshot
-- (the first of each transition and every out value stay), half the time of unnesting them all.
WITH seen AS (
    SELECT instance, model, snapshot_id, latches,
           CASE WHEN age_s IS NOT NULL AND seen_at = scraped_at
                THEN scraped_at + to_microseconds(CAST(round(age_s * 1e6) AS BIGINT))
                ELSE seen_at END AS seen,
           list_transform(latches, lambda l: struct_pack(c := l."constraint", o := l.out, s := l.since)) AS keys
    FROM instance_snapshots WHERE {where} AND scraped_at IS NOT NULL
),
kept AS (
    SELECT instance, model, snapshot_id, seen, latches FROM seen
    QUALIFY keys IS DISTINCT FROM lag(keys) OVER (PARTITION BY instance ORDER BY seen, snapshot_id)
         OR list_bool_or(list_transform(keys, lambda k: k.o))
),
latch AS (
    SELECT instance, model, snapshot_id, seen, l."constraint" AS name, l.out AS is_out, l.value AS value,
           coalesce(l.since, seen) AS moved, l.since IS NOT NULL AS dated
    FROM (SELECT instance, model, snapshot_id, seen, unnest(latches) AS l FROM kept)
),
moves AS (
    SELECT * FROM latch
    QUALIFY dated OR is_out OR NOT bool_or(dated) OVER (PARTITION BY instance, name)
),
marked AS (
    SELECT *, CASE WHEN is_out IS DISTINCT FROM lag(is_out) OVER w THEN 1 ELSE 0 END AS changed
    FROM moves
    WINDOW w AS (PARTITION BY instance, name ORDER BY moved, is_out DESC, seen, snapshot_id)
),
runs AS (
    SELECT *, sum(changed) OVER (PARTITION BY instance, name ORDER BY moved, is_out DESC, seen, snapshot_id
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS run
    FROM marked
),
bounds AS (
    SELECT instance, model, name, run, is_out, moved AS start, lead(moved) OVER p AS next_at
    FROM runs WHERE changed = 1
    WINDOW p AS (PARTITION BY instance, name ORDER BY run)
),
peaks AS (
    SELECT instance, name, run, max(value) AS peak FROM runs WHERE is_out GROUP BY instance, name, run
)
SELECT * FROM (
    SELECT b.instance, b.model, b.name AS "constraint", b.start, b.next_at AS "end", p.peak
    FROM bounds b JOIN peaks p USING (instance, name, run)
    WHERE b.is_out
    ORDER BY b.start DESC, b.instance, b.name LIMIT ?
) ORDER BY instance, "constraint", start;

-- name: latch_snapshots
-- How many snapshots the intervals come from.
SELECT count(*) AS n FROM instance_snapshots WHERE {where} AND scraped_at IS NOT NULL;
