"""``routelens replay --verify``: every stored decision of a window, re-decided under its own policy.

Each trace names the effective policy it was decided with (``policy_hash``); the store keeps that
policy once under its hash (``GET /v1/policies/{hash}``). Each trace is decided again under it
(:func:`router_core.redecide`) and compared step by step with what was recorded
(:func:`router_core.first_difference`). A trace that cannot be decided again is counted with its
reason (its detail sampled out, its policy not stored, refused before any decision, its stored
record not loading), never guessed. Through a server's query API each trace is fetched whole
(:func:`verify_range`); a trace file is read in bulk (:func:`verify_file`). Either way the report
is the same: its counts, and the oldest mismatches listed, oldest first (:class:`VerifyCount`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from app.experiments._collector import fewer_collections
from app.experiments.rows import SAMPLED_OUT, UNREADABLE
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

__all__ = ["MAX_LISTED", "PARALLEL_MIN", "PolicyShelf", "VerifyCount", "summary_line", "verify_file", "verify_range",
           "verify_trace"]

MAX_LISTED = 100  # mismatches listed in the report (all are counted)
NOT_STORED = "its policy is not stored"
REFUSED = "refused before any decision (nothing to re-decide)"


class PolicyShelf:
    """Stored policies by hash, each read and built once (or the reason it cannot be)."""

    def __init__(self, read: Callable[[str], Any]) -> None:
        self._read = read
        self._built: dict[str, tuple[Policy, RuleSet | None] | str] = {}

    def __len__(self) -> int:
        return len(self.loaded())

    def loaded(self) -> set[str]:
        """The hashes of the policies read and built."""
        return {h for h, v in self._built.items() if not isinstance(v, str)}

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


class VerifyCount:
    """A verification's counts as traces come, mergeable across processes.

    The mismatches listed are the oldest ``max_listed`` (by ``ts``, then request id), oldest
    first: whichever order the traces come in (a store's pages newest first, a file in arrival
    order, one process per time range), the same window lists the same mismatches.
    """

    def __init__(self, max_listed: int = MAX_LISTED) -> None:
        self.max_listed = max_listed
        self.n = self.reproduced = self.mismatched = 0
        self.reasons: Counter[str] = Counter()
        self.policies: set[str] = set()  # the policies read and built (set by the caller)
        self._listed: list[tuple[datetime, str, Mismatch]] = []

    def add(self, trace: DecisionTrace | None, out: Mismatch | str | None) -> None:
        """Count one trace: reproduced (``out`` None), not replayable (its reason) or a mismatch."""
        self.n += 1
        if out is None:
            self.reproduced += 1
        elif isinstance(out, str):
            self.reasons[out] += 1
        else:
            self.mismatched += 1
            if trace is not None and self.max_listed > 0:
                self._listed.append((trace.ts, trace.request_id, out))
                if len(self._listed) >= 2 * self.max_listed:
                    self._keep()

    def merge(self, other: VerifyCount) -> None:
        """Add ``other``'s counts to these."""
        self.n += other.n
        self.reproduced += other.reproduced
        self.mismatched += other.mismatched
        self.reasons.update(other.reasons)
        self.policies |= other.policies
        self._listed += other._listed
        self._keep()

    def _keep(self) -> None:
        self._listed.sort(key=lambda m: (m[0], m[1]))
        del self._listed[self.max_listed:]

    def report(self, started: float) -> VerifyReport:
        """The report (``started``: the ``time.perf_counter()`` the verification began at)."""
        self._keep()
        reasons = dict(sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        return VerifyReport(n=self.n, reproduced=self.reproduced, not_replayable=reasons,
                            mismatches=[m for _, _, m in self._listed], mismatched=self.mismatched,
                            policies=len(self.policies), elapsed_s=time.perf_counter() - started)


def verify_range(store: TraceStore, flt: TraceFilter, *, progress: Callable[[int], None] | None = None,
                 max_listed: int = MAX_LISTED) -> VerifyReport:
    """Re-decide every trace matching ``flt`` (its window included) under its own policy, trace by trace.

    Through a store's query API: each page of summaries, then each trace with its detail fetched
    whole (``get``). A trace file is read in bulk by :func:`verify_file`.
    """
    started = time.perf_counter()
    shelf = PolicyShelf(store.policy)
    count = VerifyCount(max_listed)
    cursor: str | None = None
    with fewer_collections():
        while True:
            page = store.search(flt, limit=1000, cursor=cursor)
            for item in page.items:
                try:
                    trace = store.get(item.request_id) if item.detail else None
                except ValueError:  # a stored record no model admits (pydantic's ValidationError)
                    count.add(None, UNREADABLE)
                    continue
                count.add(trace, SAMPLED_OUT if trace is None else verify_trace(trace, shelf))
            if progress is not None:
                progress(count.n)
            cursor = page.next_cursor
            if cursor is None:
                break
    count.policies = shelf.loaded()
    return count.report(started)


PARALLEL_MIN = 2_000  # traces from which verify_file forks by default (about 10 ms a trace at 200 candidates)


def _verify_part(path: Path, flt: TraceFilter, max_listed: int = MAX_LISTED) -> VerifyCount:
    """Verify the traces of ``path`` matching ``flt``, read in bulk (one process's share of a window)."""
    from app.experiments.bulk import open_file
    from app.experiments.stored_traces import read_traces
    from ingest import DuckDBTraceStore

    count = VerifyCount(max_listed)
    con = open_file(path)
    store = DuckDBTraceStore(path, read_only=True)  # the stored policies
    try:
        shelf = PolicyShelf(store.policy)
        with fewer_collections():
            for batch in read_traces(con, flt):
                for item in batch:
                    count.add(item.trace, item.missing if item.trace is None else verify_trace(item.trace, shelf))
        count.policies = shelf.loaded()
    finally:
        store.close()
        con.close()
    return count


def verify_file(path: str | Path, since: datetime, until: datetime, flt: TraceFilter | None = None, *,
                workers: int | None = 1, max_listed: int = MAX_LISTED) -> VerifyReport:
    """:func:`verify_range` over a trace file no process writes (``[since, until)`` and ``flt``), read in bulk.

    The traces are read a batch at a time (:func:`app.experiments.stored_traces.read_traces`: one
    scan, each stored state validated once and shared) and each decided again as
    :func:`verify_trace` decides it: the report is :func:`verify_range`'s, at a fifth of the CPU a
    trace at 200 candidates (``python -m bench.replay_big``). ``workers``: processes, one per time
    range (:func:`app.experiments.by_range.run_by_range`; None: one per core, up to 2, from
    :data:`PARALLEL_MIN` traces, the command's default). The default, 1, stays in this process: the
    demo and the drill verify from a process with threads of its own, which a fork would copy.

    Raises:
        duckdb.Error: The file is missing, locked by a writer or not a DuckDB file.
        SinkError: The file cannot be opened as a trace store.
        RuntimeError: A worker process failed.
    """
    from app.experiments.by_range import run_by_range

    started = time.perf_counter()
    window = (flt or TraceFilter()).model_copy(update={"start": since, "end": until})
    count = VerifyCount(max_listed)
    for part in run_by_range(Path(path), window, partial(_verify_part, max_listed=max_listed), workers=workers,
                             parallel_min=PARALLEL_MIN):
        count.merge(part)
    return count.report(started)


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
