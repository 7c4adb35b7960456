-- Retention by age: $1 is the cutoff. Snapshots get a day of grace because a trace just inside
-- the window may still point at a snapshot first seen just outside it.
DELETE FROM traces WHERE ts < $1;
DELETE FROM traffic_minutes WHERE minute < date_trunc('minute', $1);
DELETE FROM feedback WHERE ts < $1;
DELETE FROM probe_results WHERE ts < $1;
DELETE FROM router_events WHERE ts < $1;
DELETE FROM quarantine WHERE ts < $1;
DELETE FROM instance_snapshots WHERE seen_at < $1 - INTERVAL 1 DAY;
