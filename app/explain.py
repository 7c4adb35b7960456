"""How a decision trace reads as text, the same in the terminal tree and on the page.

Pure functions over :mod:`schemas` models returning ``str`` (no rich, pandas or Streamlit):
:mod:`app.cli.trace_tree` and :mod:`app.ui.data.trace_tables` both format through here, so a
violation or a number reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from schemas.trace import CandidateEval, DecisionTrace, Violation

__all__ = [
    "DASH",
    "features_summary",
    "fmt_num",
    "fmt_pct",
    "ordered_candidates",
    "outcome_text",
    "selection_text",
    "to_text",
    "violation_text",
]

DASH = "—"


def fmt_num(value: float | None, digits: int = 3) -> str:
    """Format a number compactly (``0.742``, ``14``, ``3,000``); None becomes an em dash."""
    if value is None:
        return DASH
    if abs(value) < 1:
        return f"{value:.{digits}g}"
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_pct(value: float | None) -> str:
    """Format a share in [0, 1] as a whole percentage (``97%``); None becomes an em dash."""
    return DASH if value is None else f"{value:.0%}"


def to_text(value: object) -> str:
    """Render a plain value: None as an em dash, booleans as ``yes``/``no``, anything else by ``str``."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def violation_text(violation: Violation) -> str:
    """Render a violation as ``constraint: metric value op threshold — reason``."""
    value = "no data" if violation.value is None else fmt_num(violation.value)
    text = f"{violation.constraint}: {violation.metric} {value} {violation.op} {fmt_num(violation.threshold)}"
    return f"{text} — {violation.reason}" if violation.reason else text


def ordered_candidates(candidates: Iterable[CandidateEval]) -> list[CandidateEval]:
    """Sort candidates best first: ranked by rank, then unranked feasible, then rejected."""

    def key(c: CandidateEval) -> tuple[bool, bool, int, str]:
        return (not c.feasible, c.rank is None, c.rank or 0, c.instance)

    return sorted(candidates, key=key)


def outcome_text(trace: DecisionTrace) -> str:
    """Summarise the outcome in one line, e.g. ``ok · HTTP 200 · 3,890 ms``."""
    out = trace.outcome
    status = f"{out.status.value} ({out.error_class})" if out.error_class else out.status.value
    return f"{status} · HTTP {out.http_status} · {fmt_num(out.total_ms, 1)} ms"


def selection_text(trace: DecisionTrace) -> str | None:
    """Return ``model → instance`` (``?`` for a missing half), or None when nothing was selected."""
    if not (trace.selected_model or trace.selected_instance):
        return None
    return f"{trace.selected_model or '?'} → {trace.selected_instance or '?'}"


def features_summary(trace: DecisionTrace) -> dict[str, str]:
    """Return the analysed request features as ``name -> text`` pairs."""
    return {name: to_text(value) for name, value in trace.features.model_dump(mode="json").items()}
