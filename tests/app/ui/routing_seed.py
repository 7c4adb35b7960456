"""A DuckDB store seeded for the topology and constraints pages: traffic, removals, latches (fixed clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ingest import DuckDBTraceStore
from schemas import CandidateEval, DecisionTrace, InstanceSnapshot, Violation
from schemas.fleet import LatchState
from tests.factories import make_trace

AT = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)  # every page test pins its window end here (?end=)
AT_PARAM = AT.isoformat()


def ago(minutes: float) -> datetime:
    return AT - timedelta(minutes=minutes)


def _violation(constraint: str, value: float) -> Violation:
    return Violation(constraint=constraint, metric=constraint, op="<=", value=value, threshold=0.9,
                     reason=f"{constraint} {value} breaks <= 0.9")


def _trace(i: int, minutes: float, rule: str, model: str, inst: str, arm: str, *, fallback: bool = False,
           rejected: str = "c-hot", constraint: str = "kv-cache", terms: list[float] | None = None) -> DecisionTrace:
    chosen = CandidateEval(instance=inst, model=model, feasible=True, score_terms=[0.8], total=0.32, rank=1)
    # Terms on a removed candidate (fail_open) make its removal decisive (0.4 * 0.9 = 0.36 beats 0.32).
    out = CandidateEval(instance=rejected, model=model, feasible=False, score_terms=terms or [],
                        violations=[_violation(constraint, 0.97)])
    return make_trace(f"req-{i:03d}", ts=ago(minutes), rule=rule, experiment_arm=arm, selected_model=model,
                      selected_instance=inst, fallback_triggered=fallback, candidates=[chosen, out])


def traces() -> list[DecisionTrace]:
    """In the last hour: code→coder→c-a ×3 and →c-b ×1 (a fallback), arm A, each removing c-hot on kv-cache
    (undecided); chat→llama→l-a ×2, arm B, removing l-hot on error-rate (decisive). One more chat 3 h ago."""
    out = [_trace(i, 5 + i, "code", "coder", "c-a", "A") for i in range(3)]
    out.append(_trace(3, 9, "code", "coder", "c-b", "A", fallback=True))
    out += [_trace(4 + i, 20 + i, "chat", "llama", "l-a", "B", rejected="l-hot", constraint="error-rate",
                   terms=[0.9]) for i in range(2)]
    out.append(_trace(9, 180, "chat", "llama", "l-a", "B", rejected="l-hot", constraint="error-rate", terms=[0.9]))
    return out


def _snap(inst: str, minutes: float, constraint: str, out: bool, value: float, since: float) -> InstanceSnapshot:
    model = "llama" if inst.startswith("l-") else "coder"  # as the traces and the live state place them
    return InstanceSnapshot(instance=inst, model=model, scraped_at=ago(minutes), queue=value,
                            latches=[LatchState(constraint=constraint, out=out, value=value, since=ago(since))])


def snapshots() -> list[InstanceSnapshot]:
    """c-hot's kv-cache latch out 50→30 min ago and out again since 10 min ago; l-hot out since 2 h ago."""
    return [
        _snap("c-hot", 55, "kv-cache", False, 0.5, 70), _snap("c-hot", 49, "kv-cache", True, 0.95, 50),
        _snap("c-hot", 40, "kv-cache", True, 0.97, 50), _snap("c-hot", 29, "kv-cache", False, 0.6, 30),
        _snap("c-hot", 9, "kv-cache", True, 0.96, 10), _snap("l-hot", 45, "error-rate", True, 0.2, 120),
    ]


def router_state() -> dict[str, Any]:
    """``GET /v1/router/state``: c-hot out on kv-cache, c-a in, l-hot out and stale."""
    def latch(c: str, out: bool, value: float, since: float) -> dict[str, Any]:
        return {"constraint": c, "out": out, "value": value, "since": ago(since).isoformat()}

    return {"instances": [
        {"instance": "c-a", "model": "coder", "latches": [latch("kv-cache", False, 0.3, 60)]},
        {"instance": "c-hot", "model": "coder", "latches": [latch("kv-cache", True, 0.96, 10),
                                                            latch("error-rate", False, 0.0, 60)]},
        {"instance": "l-hot", "model": "llama", "stale": True, "latches": [latch("error-rate", True, 0.2, 120)]},
    ], "scrape": {"stalled": False}}


def seeded_file(path: Path, *, empty: bool = False) -> Path:
    """Write the seed (nothing when ``empty``) into a DuckDB file at ``path`` and close it."""
    store = DuckDBTraceStore(path)
    try:
        if not empty:
            store.write_records([*traces(), *snapshots()])
    finally:
        store.close()
    return path
