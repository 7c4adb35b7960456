"""Stored rows back to models: what both backends do after reading.

Rows come back with every column, NULL where a value is missing. A NULL in a field whose model
does not allow None (a field added after the row was written, or one a migration could not
convert) is dropped so that the model default applies; storage-only columns are removed.
"""

from __future__ import annotations

import types
from functools import cache
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from schemas.fleet import InstanceSnapshot
from schemas.queries import TraceSummary
from schemas.trace import DecisionTrace

__all__ = ["assemble_trace", "clean", "model_in", "state_ids", "summary_of"]


def _allows_none(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


def model_in(annotation: Any) -> type[BaseModel] | None:
    """Return the model inside an annotation (``list[M]``, ``M | None``...), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = model_in(arg)
        if found is not None:
            return found
    return None


@cache
def _fields(model: type[BaseModel]) -> tuple[tuple[str, bool, type[BaseModel] | None], ...]:
    """Return ``(name, allows None, nested model)`` for each field of ``model``.

    Worked out once per model: a trace holds a few hundred nested values, and inspecting the
    annotations again for each one was most of the Python time of a ``get``.
    """
    return tuple((name, _allows_none(info.annotation), model_in(info.annotation))
                 for name, info in model.model_fields.items())


def clean(row: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """Return ``row`` restricted to ``model``'s fields, NULLs of non-nullable fields dropped."""
    out: dict[str, Any] = {}
    for name, nullable, inner in _fields(model):
        if name not in row:
            continue
        value = row[name]
        if value is None:
            if nullable:
                out[name] = None
            continue
        if inner is not None and isinstance(value, dict):
            value = clean(value, inner)
        elif inner is not None and isinstance(value, list):
            value = [clean(v, inner) if isinstance(v, dict) else v for v in value]
        out[name] = value
    return out


def state_ids(row: dict[str, Any]) -> list[str]:
    """Return the snapshot ids a stored trace row points at."""
    return [c["state_id"] for c in row.get("candidates") or [] if c.get("state_id")]


# Gauges a snapshot holds and the range the model admits (None: no upper bound).
_GAUGE_RANGES: dict[str, float | None] = {
    "age_s": None, "queue": None, "running": None, "kv_cache_usage": 1.0, "warmup_progress": 1.0,
    "error_rate": 1.0, "p50_latency_ms": None, "p95_latency_ms": None, "ttft_p95_ms": None, "e2e_p95_ms": None,
}


def readable_state(state: dict[str, Any]) -> dict[str, Any]:
    """A stored snapshot with every gauge outside its range (or NaN) set to None and named in ``scrape_error``.

    Since the scrape refuses such values this only meets rows stored by an older version (a negative
    queue, say); without it one such value would make the whole trace unreadable.
    """
    bad = [k for k, top in _GAUGE_RANGES.items() if isinstance(v := state.get(k), float | int)
           and not (v >= 0 and (top is None or v <= top))]  # NaN fails every comparison
    if not bad:
        return state
    note = "out_of_range on read: " + ", ".join(f"{k}={state[k]!r} dropped" for k in bad)
    previous = state.get("scrape_error")
    return {**state, **dict.fromkeys(bad), "scrape_error": f"{previous}; {note}" if previous else note}


def assemble_trace(row: dict[str, Any], states: dict[str, dict[str, Any]]) -> DecisionTrace:
    """Rebuild a :class:`DecisionTrace` from its stored row and the snapshots it points at."""
    cands = []
    for cand in row.get("candidates") or []:
        cand = dict(cand)
        sid = cand.pop("state_id", None)
        age, stale = cand.pop("state_age_s", None), cand.pop("state_stale", None)
        state = states.get(sid) if sid else None
        if state is not None and stale is not None:  # the decision's own age (rows before it: the snapshot's)
            state = {**state, "age_s": age, "stale": stale}
        cand["state"] = readable_state(clean(state, InstanceSnapshot)) if state is not None else None
        cands.append(cand)
    return DecisionTrace.model_validate(clean({**row, "candidates": cands}, DecisionTrace))


def summary_of(row: dict[str, Any]) -> TraceSummary:
    """Build a search result from a flat row (column names as in :class:`TraceSummary`)."""
    return TraceSummary.model_validate(clean(row, TraceSummary))
