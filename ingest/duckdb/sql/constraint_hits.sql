-- The expression of `traces.constraint_hits` over one trace row (`candidates`, `score_weights`,
-- `selected_instance`): a JSON array of [constraint, instance, model, verdict] per candidate and
-- constraint that candidate broke (once per constraint, however many metrics broke it). verdict:
-- "removed" (a hard violation, the would-be total did not beat the selected total), "decisive"
-- (it did), "undecided" (no terms recorded or no selected total), "soft". NULL for a trace stored
-- before the column existed; '[]' for a trace without violations.
to_json(flatten(list_transform(list_filter(candidates, lambda c: len(c.violations) > 0), lambda c:
    list_transform(
        list_distinct(list_transform(list_filter(c.violations, lambda x: x.severity = 'hard'), lambda x: x."constraint")),
        lambda n: [n, c.instance, c.model,
                   CASE WHEN len(c.score_terms) = 0
                          OR list_filter(candidates, lambda s: s.instance = selected_instance)[1].total IS NULL
                        THEN 'undecided'
                        WHEN coalesce(c.weight_factor, 1.0) * coalesce(list_sum(list_transform(c.score_terms,
                               lambda x, i: x * score_weights[i].weight)), 0.0)
                             > list_filter(candidates, lambda s: s.instance = selected_instance)[1].total
                        THEN 'decisive' ELSE 'removed' END])
    || list_transform(
        list_distinct(list_transform(list_filter(c.violations, lambda x: x.severity = 'soft'), lambda x: x."constraint")),
        lambda n: [n, c.instance, c.model, 'soft'])
)))::VARCHAR
