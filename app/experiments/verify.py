"""``routelens replay --verify``: every stored decision of a window, re-decided under its own policy.

Each trace names the effective policy it was decided with (``policy_hash``); the store keeps that
policy once under its hash (``GET /v1/policies/{hash}``). Each trace is decided again under it
(:func:`router_core.redecide`) and compared step by step with what was recorded
(:func:`router_core.first_difference`). A trace that cannot be decided again is counted with its
reason (its detail sampled out, its policy not stored, refused before any decision), never guessed.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from app.experiments.rows import SAMPLED_OUT
from ingest import TraceStore
from router_core import (
    NotReplayable,
    Policy,
    PolicyError,
    RuleSet,
    UnknownModel,
    build_policy,
    builtin_registry,
    first_difference,
    from_document,
    redecide,
)
from schemas.queries import TraceFilter
from schemas.replay_report import Mismatch, VerifyReport
from schemas.trace import DecisionTrace

__all__ = ["MAX_LISTED", "PolicyShelf", "summary_line", "verify_file", "verify_range", "verify_trace"]

MAX_LISTED = 100  # mismatches listed in the report (all are counted)
NOT_STORED = "its policy is not stored"
REFUSED = "refused before any decision (nothing to re-decide)"


class PolicyShelf:
    """Stored policies by hash, each read and built once (or the reason it cannot be)."""

    def __init__(self, read: Callable[[str], Any]) -> None:
        self._read = read
        self._built: dict[str, tuple[Policy, RuleSet | None] | str] = {}

    def __len__(self) -> int:
        return sum(1 for v in self._built.values() if not isinstance(v, str))

    def get(self, policy_hash: str) -> tuple[Policy, RuleSet | None] | str:
        """The policy and rule set stored under ``policy_hash``, or why there are none."""
        got = self._built.get(policy_hash)
        if got is None:
            got = self._built[policy_hash] = self._load(policy_hash)
        return got

    def _load(self, policy_hash: str) -> tuple[Policy, RuleSet | None] | str:
        try:
            record = self._read(policy_hash)
        except Exception:  # noqa: BLE001  (a file from before policies were stored has no table for them)
            return NOT_STORED
        if record is None:
            return NOT_STORED
        try:
            config, rules = from_document(record.document)
            return build_policy(config, builtin_registry()), rules
        except (ValueError, PolicyError) as exc:
            return f"its stored policy does not load ({type(exc).__name__})"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def verify_trace(trace: DecisionTrace, shelf: PolicyShelf) -> Mismatch | str | None:
    """None when ``trace`` is reproduced, a :class:`Mismatch`, or the reason it cannot be re-decided."""
    if not trace.decision_trace and not trace.candidates:
        step = trace.policy
        if step is None or step.throttled != "reject":
            return REFUSED
    got = shelf.get(trace.policy_hash)
    if isinstance(got, str):
        return got
    policy, rules = got
    if not trace.decision_trace and not trace.candidates:  # refused by its rule's throttle: the rule must say so
        rule = next((r for r in (rules.rules if rules else ()) if r.name == (trace.policy and trace.policy.rule)),
                    None)
        if rule is not None and rule.throttle is not None:
            return None
        return Mismatch(request_id=trace.request_id, first_differing_step="throttle", live="reject",
                        replayed=None if rule is None else "no throttle")
    if any(c.state is None for c in trace.candidates):
        return SAMPLED_OUT
    try:
        decision = redecide(trace, policy, rules)
    except NotReplayable as exc:
        return str(exc)
    except UnknownModel:
        return "its model is not in the policy's fleet"
    diff = first_difference(trace, decision)
    if diff is None:
        return None
    return Mismatch(request_id=trace.request_id, first_differing_step=diff.step, live=_plain(diff.live),
                    replayed=_plain(diff.replayed))


def verify_range(store: TraceStore, flt: TraceFilter, *, progress: Callable[[int], None] | None = None,
                 max_listed: int = MAX_LISTED) -> VerifyReport:
    """Re-decide every trace matching ``flt`` (its window included) under its own policy."""
    started = time.perf_counter()
    shelf = PolicyShelf(store.policy)
    n = reproduced = mismatched = 0
    reasons: Counter[str] = Counter()
    listed: list[Mismatch] = []
    cursor: str | None = None
    while True:
        page = store.search(flt, limit=1000, cursor=cursor)
        for item in page.items:
            n += 1
            trace = store.get(item.request_id) if item.detail else None
            out = SAMPLED_OUT if trace is None else verify_trace(trace, shelf)
            if out is None:
                reproduced += 1
            elif isinstance(out, str):
                reasons[out] += 1
            else:
                mismatched += 1
                if len(listed) < max_listed:
                    listed.append(out)
        if progress is not None:
            progress(n)
        cursor = page.next_cursor
        if cursor is None:
            break
    return VerifyReport(n=n, reproduced=reproduced, not_replayable=dict(reasons.most_common()), mismatches=listed,
                        mismatched=mismatched, policies=len(shelf), elapsed_s=time.perf_counter() - started)


def verify_file(path: str | Path, since: datetime, until: datetime) -> VerifyReport:
    """:func:`verify_range` over a trace file no process writes (``[since, until)``)."""
    from ingest import DuckDBTraceStore

    store = DuckDBTraceStore(path, read_only=True)
    try:
        return verify_range(store, TraceFilter(start=since, end=until))
    finally:
        store.close()


def summary_line(report: VerifyReport) -> str:
    """One line: how many decisions came out the same under their own policy, and what did not."""
    skipped = sum(report.not_replayable.values())
    line = (f"{report.n:,} decisions re-decided under their own policy: {report.reproduced:,} reproduced, "
            f"{report.mismatched:,} different, {skipped:,} not replayable")
    if report.not_replayable:
        line += " (" + "; ".join(f"{k:,} {reason}" for reason, k in report.not_replayable.items()) + ")"
    if report.mismatches:
        m = report.mismatches[0]
        line += f"; first mismatch {m.request_id}: {m.first_differing_step}"
    return line
