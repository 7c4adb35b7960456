-- Flattened views for analytics: one row per candidate, per decision step, per attempt.
-- Views, not copies: the nested `traces` row is the one stored form, and DuckDB unnests it
-- at query time (cheaper than writing every trace three more times).
CREATE OR REPLACE VIEW trace_candidates AS
SELECT request_id, ts, router_version, experiment_arm, rule, selected_model, selected_instance,
       detail, ordinal, c.*, c.instance = selected_instance AS selected
FROM (
    SELECT *, unnest(candidates) AS c, unnest(range(1, len(candidates) + 1)) AS ordinal
    FROM traces
);

CREATE OR REPLACE VIEW trace_steps AS
SELECT request_id, ts, router_version, s.*
FROM (SELECT request_id, ts, router_version, unnest(decision_trace) AS s FROM traces);

CREATE OR REPLACE VIEW trace_attempts AS
SELECT request_id, ts, router_version, a.*
FROM (SELECT request_id, ts, router_version, unnest(attempts) AS a FROM traces);

-- A candidate's state at decision time, joined back from the shared snapshots: its age and stale
-- flag are the decision's (the candidate's state_age_s, state_stale), stored beside the reference.
CREATE OR REPLACE VIEW trace_candidate_states AS
SELECT c.request_id, c.ts, c.ordinal, c.instance,
       s.* REPLACE (CASE WHEN c.state_stale IS NULL THEN s.age_s ELSE c.state_age_s END AS age_s,
                    coalesce(c.state_stale, s.stale) AS stale)
FROM trace_candidates c JOIN instance_snapshots s ON s.snapshot_id = c.state_id;
