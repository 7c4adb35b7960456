"""Constraint binding counts computed in Python, from stored trace rows (dicts as a backend returns them).

DuckDB derives the same verdicts in SQL once per trace (:mod:`ingest.duckdb.derived`); Elasticsearch,
whose nested candidates a plain ``terms`` aggregation cannot pair with the trace's weights, reads a
bounded page of traces and tallies them here.

The router records ``score_terms`` for every candidate it had state for: the feasible ones it
ranked, and the ones a hard violation removed, with the terms they would have scored (no total,
no rank). A removal is ``decisive`` when that would-be total beats the selected total, ``removed``
when it does not, and ``undecided`` when the trace holds no terms for it (detail sampled out, or a
trace written before the router recorded them) or nothing was selected.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from ingest.trace_store import sort_constraints
from schemas.queries import ConstraintStat

__all__ = ["VERDICTS", "ConstraintTally", "would_be_total"]


def would_be_total(candidate: Mapping[str, Any], weights: list[float]) -> float | None:
    """Return ``weight_factor * sum(weight_i * score_terms[i])``, or None when no terms were recorded."""
    terms = candidate.get("score_terms") or []
    if not terms:
        return None
    factor = candidate.get("weight_factor")
    return (1.0 if factor is None else float(factor)) * sum(w * float(t) for w, t in zip(weights, terms, strict=False))


VERDICTS = ("removed", "decisive", "undecided", "soft")


class ConstraintTally:
    """Counts removals, decisive removals, undecided removals and soft violations per (constraint, instance, model).

    A verdict is one of :data:`VERDICTS`: a hard violation whose would-be total did not beat the
    selected total (``removed``), did (``decisive``), or is unknown (``undecided``); or a soft one.
    """

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])

    def count(self, constraint: str, instance: str, model: str, verdict: str, n: int = 1) -> None:
        """Count ``n`` candidates of ``instance`` (``model``) that ``constraint`` gave ``verdict``."""
        counts = self._counts[(constraint, instance, model)]
        if verdict == "soft":
            counts[3] += n
            return
        counts[0] += n
        if verdict == "decisive":
            counts[1] += n
        elif verdict == "undecided":
            counts[2] += n

    def add(self, row: Mapping[str, Any]) -> None:
        """Count one trace row (``selected_instance``, ``score_weights``, ``candidates``)."""
        cands: list[Mapping[str, Any]] = row.get("candidates") or []
        weights = [float(w.get("weight") or 0.0) for w in row.get("score_weights") or []]
        chosen = row.get("selected_instance")
        best = next((c.get("total") for c in cands if c.get("instance") == chosen), None)
        for cand in cands:
            violations = cand.get("violations") or []
            if not violations:
                continue
            instance, model = str(cand.get("instance")), str(cand.get("model"))
            hard = {str(v.get("constraint")) for v in violations if v.get("severity", "hard") == "hard"}
            would = would_be_total(cand, weights) if hard else None
            verdict = "undecided" if would is None or best is None else "decisive" if would > float(best) else "removed"
            for name in hard:
                self.count(name, instance, model, verdict)
            for name in {str(v.get("constraint")) for v in violations if v.get("severity") == "soft"}:
                self.count(name, instance, model, "soft")

    def add_all(self, rows: Iterable[Mapping[str, Any]]) -> ConstraintTally:
        """Count every row; return self."""
        for row in rows:
            self.add(row)
        return self

    def stats(self) -> list[ConstraintStat]:
        """Return the counts as :class:`ConstraintStat`, ordered by :func:`sort_constraints`."""
        return sort_constraints([
            ConstraintStat(constraint=c, instance=i, model=m, removed=n[0], decisive=n[1], undecided=n[2], soft=n[3])
            for (c, i, m), n in self._counts.items()
        ])
