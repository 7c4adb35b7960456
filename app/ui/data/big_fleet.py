"""What a picture of a big fleet draws: the rows worth a look, and how many it leaves to the table beside it.

A chart with one row per candidate or per instance is read at a glance with a handful of rows;
with a platform team's 200 instances it was 8,000 px of identical bars ("Why this model": 200
candidates' stacked score terms) or 7,000 px of green cells ("Latches now"). Each function keeps
the rows that answer the page's question (the best-scored and the chosen; the instances held
out or stale; the latches out longest) and says how many it left out: the tables under the
charts keep every row. Pure: frames in, frames out.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

__all__ = ["CHART_CANDIDATES", "CHART_ROWS", "latches_to_draw", "longest_out", "top_scored"]

CHART_CANDIDATES = 20  # candidates the score-terms chart draws (the chosen one always among them)
CHART_ROWS = 40  # instances or latch rows a fleet chart draws before it keeps only those worth a look


def top_scored(terms: pd.DataFrame, keep: Iterable[str | None] = (),
               n: int = CHART_CANDIDATES) -> tuple[pd.DataFrame, int]:
    """The score-term rows of the ``n`` best candidates (``terms`` is best first) and of those in ``keep``.

    Returns:
        The rows kept, in their order, and how many candidates were left out.
    """
    order = list(dict.fromkeys(terms["instance"]))
    shown = set(order[:n]) | {k for k in keep if k is not None and k in order}
    return terms[terms["instance"].isin(shown)], len(order) - len(shown)


def latches_to_draw(rows: pd.DataFrame, n: int = CHART_ROWS) -> tuple[pd.DataFrame, int]:
    """The latch rows of instances worth drawing: all of them up to ``n`` instances, else those out or stale.

    Returns:
        The rows kept (by instance, as given) and how many instances, every latch in and fresh, were left out.
    """
    instances = rows["instance"].nunique()
    if instances <= n:
        return rows, 0
    flagged = set(rows.loc[(rows["state"] == "out") | rows["stale"].astype(bool), "instance"])
    kept = rows[rows["instance"].isin(flagged)]
    return kept, instances - len(flagged)


def longest_out(intervals: pd.DataFrame, n: int = CHART_ROWS) -> tuple[pd.DataFrame, int]:
    """The intervals of the ``n`` (instance, constraint) rows out longest over the window, all when fewer.

    Returns:
        The intervals kept and how many rows were left out.
    """
    keys = intervals["instance"] + "\x00" + intervals["constraint"]
    total = intervals.groupby(keys)["duration_s"].sum()
    if len(total) <= n:
        return intervals, 0
    longest = set(total.sort_values(ascending=False, kind="stable").index[:n])
    return intervals[keys.isin(longest)], len(total) - n
