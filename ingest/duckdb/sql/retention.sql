-- Retention by age: $1 is the cutoff. Snapshots get a day of grace because a trace just inside
-- the window may still point at a snapshot first seen just outside it.
-- Traces and their feedback go by whole minutes, as the rollup's minutes go: a minute the rollup keeps
-- keeps its traces too. Feedback goes with its trace (by the trace's ts, whatever its own: a verdict
-- stamped before its trace stays while the trace does), and one without a stored trace by its own ts.
-- So the live reads (feedback joined to the traces) count what the rollup's kept minutes count.
DELETE FROM feedback WHERE feedback_id IN (
    SELECT f.feedback_id FROM feedback f LEFT JOIN traces t ON t.request_id = f.request_id
    WHERE coalesce(t.ts, f.ts) < date_trunc('minute', $1));
DELETE FROM traces WHERE ts < date_trunc('minute', $1);
DELETE FROM traffic_minutes WHERE minute < date_trunc('minute', $1);
DELETE FROM probe_results WHERE ts < $1;
DELETE FROM router_events WHERE ts < $1;
DELETE FROM quarantine WHERE ts < $1;
DELETE FROM instance_snapshots WHERE seen_at < $1 - INTERVAL 1 DAY;
