"""Verdicts with hysteresis: what the probes of one kind conclude about one instance over time.

One probe result is noisy; the router must not move traffic on every blip. Per (instance, kind) a
:class:`Hysteresis` keeps the last ``fail_n`` results and the current verdict:

* ``ok``/``degraded`` → ``failed`` when at least ``fail_k`` of the last ``fail_n`` results failed;
* ``ok`` → ``degraded`` when at least ``fail_k`` of the last ``fail_n`` were degraded or worse
  (a latency verdict needs the same k-of-n evidence as a failure, so one slow probe moves nothing);
* ``failed`` → back only after ``recover_m`` results in a row that did not fail (the seed's
  "探针连续10次通过"): to ``ok`` when all of them were ``ok``, else to ``degraded``;
* ``degraded`` → ``ok`` only after ``recover_m`` ``ok`` results in a row.

A recovery clears the window, so the recovered verdict starts from fresh evidence. Alternating
pass/fail therefore turns the verdict ``failed`` once and keeps it there; it never oscillates.
``flaps`` counts verdict changes after the first verdict. ``since`` is the ``ts`` of the result
that changed the verdict. The status's ``reason`` explains its verdict: the latest result's
reason when that result agrees with it, else why the verdict holds against it (an ``ok`` first
verdict must not read "65% below its baseline" because one probe said so and k-of-n was not met).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from probes.evidence import is_evidence
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config.probes import ProbeHysteresis
from schemas.probe import ProbeResult, ProbeStatus

__all__ = ["RANK", "Hysteresis", "VerdictBoard"]

RANK: dict[ProbeVerdict, int] = {ProbeVerdict.OK: 0, ProbeVerdict.DEGRADED: 1, ProbeVerdict.FAILED: 2}


class Hysteresis:
    """The verdict of one probe kind on one instance, moved only by k-of-n evidence.

    Args:
        settings: ``fail_k`` of ``fail_n`` results to fail (or degrade), ``recover_m`` to recover.
        kind: The probe kind this verdict is about.
    """

    def __init__(self, settings: ProbeHysteresis, kind: ProbeKind) -> None:
        self._s = settings
        self._kind = kind
        self._window: deque[ProbeVerdict] = deque(maxlen=settings.fail_n)
        self._not_failed_run = 0
        self._ok_run = 0
        self._results = 0
        self._status: ProbeStatus | None = None

    @property
    def status(self) -> ProbeStatus | None:
        """The current verdict (with the latest result's value and reason), None before any result."""
        return self._status

    @property
    def run(self) -> tuple[int, int]:
        """``(results, ok_run)``: results taken so far, and how many of the latest were ``ok`` in a row.

        What the breakers' probe recovery counts (``BreakerBoard.probe_run``): every result, not
        only the verdict's changes.
        """
        return self._results, self._ok_run

    def load(self, status: ProbeStatus) -> None:
        """Start from a published verdict (a follower takes it from the prober); evidence restarts."""
        self._status = status
        self._window.clear()
        self._not_failed_run = self._ok_run = 0

    def observe(self, result: ProbeResult) -> ProbeStatus | None:
        """Take one result; return the new status when the verdict changed (or was first set), else None."""
        self._window.append(result.verdict)
        self._results += 1
        self._ok_run = self._ok_run + 1 if result.verdict is ProbeVerdict.OK else 0
        self._not_failed_run = self._not_failed_run + 1 if result.verdict is not ProbeVerdict.FAILED else 0
        old = self._status.verdict if self._status is not None else None
        new = self._next(old)
        changed = new is not old
        if changed and old is not None and RANK[new] < RANK[old]:
            self._window.clear()
        flaps = self._status.flaps if self._status is not None else 0
        self._status = ProbeStatus(
            kind=self._kind,
            verdict=new,
            since=result.ts if changed or self._status is None else self._status.since,
            value=result.value,
            threshold=result.threshold,
            reason=(result.reason if result.verdict is new else self._held(new, result))[:500],
            flaps=flaps + (1 if changed and old is not None else 0),
        )
        return self._status if changed else None

    def _held(self, verdict: ProbeVerdict, result: ProbeResult) -> str:
        """Why ``verdict`` holds though ``result`` says otherwise (k-of-n not met, or a recovery not done)."""
        s, n = self._s, len(self._window)
        if verdict is ProbeVerdict.FAILED:
            why = f"{self._not_failed_run} probes in a row not failed, of the {s.recover_m} needed to recover"
        elif verdict is ProbeVerdict.DEGRADED and result.verdict is ProbeVerdict.OK:
            why = f"{self._ok_run} ok probes in a row, of the {s.recover_m} needed to recover"
        elif verdict is ProbeVerdict.DEGRADED:
            failed = sum(1 for v in self._window if v is ProbeVerdict.FAILED)
            why = f"{failed} of the last {n} probes failed, {s.fail_k} needed to fail"
        else:
            worse = sum(1 for v in self._window if v is not ProbeVerdict.OK)
            why = f"{worse} of the last {n} probes not ok, {s.fail_k} needed to change it"
        latest = f"the latest probe {result.verdict.value}" + (f": {result.reason}" if result.reason else "")
        return f"{verdict.value} held ({why}); {latest}"

    def _next(self, old: ProbeVerdict | None) -> ProbeVerdict:
        k = self._s.fail_k
        failed = sum(1 for v in self._window if v is ProbeVerdict.FAILED)
        worse = sum(1 for v in self._window if v is not ProbeVerdict.OK)
        if old is ProbeVerdict.FAILED:
            if self._not_failed_run < self._s.recover_m:
                return old
            return ProbeVerdict.OK if self._ok_run >= self._s.recover_m else ProbeVerdict.DEGRADED
        if failed >= k:
            return ProbeVerdict.FAILED
        if old is ProbeVerdict.DEGRADED:
            return ProbeVerdict.OK if self._ok_run >= self._s.recover_m else old
        return ProbeVerdict.DEGRADED if worse >= k else ProbeVerdict.OK


class VerdictBoard:
    """The hysteresis verdict of every (instance, kind): what the router's ``probe`` filter reads.

    Args:
        settings: The hysteresis bounds shared by every instance and kind.
    """

    def __init__(self, settings: ProbeHysteresis | None = None) -> None:
        self._settings = settings or ProbeHysteresis()
        self._cells: dict[tuple[str, ProbeKind], Hysteresis] = {}

    def _cell(self, instance: str, kind: ProbeKind) -> Hysteresis:
        cell = self._cells.get((instance, kind))
        if cell is None:
            cell = self._cells[(instance, kind)] = Hysteresis(self._settings, kind)
        return cell

    def observe(self, result: ProbeResult) -> ProbeStatus | None:
        """Feed one result to its (instance, kind); return the new status when the verdict changed.

        A semantic or latency result that failed for want of a usable answer (refused, timed out,
        an HTTP error: :func:`probes.evidence.is_evidence`) is not taken: it says nothing about
        fidelity or speed. The syntax verdict reports the outage; the semantic and latency verdicts
        keep what the answers last showed, so a crashed instance does not come back "drifting" or
        "slow" for ``recover_m`` more probes (Prometheus's drift and latency rules fired then).
        """
        if not is_evidence(result):
            return None
        return self._cell(result.instance, result.kind).observe(result)

    def run(self, instance: str, kind: ProbeKind) -> tuple[int, int]:
        """``(results, ok_run)`` of one kind on one instance (:attr:`Hysteresis.run`; ``(0, 0)`` before any)."""
        cell = self._cells.get((instance, kind))
        return cell.run if cell is not None else (0, 0)

    def runs(self) -> dict[str, dict[str, list[int]]]:
        """Every ``(results, ok_run)``, by instance and kind: the feed's ``runs`` (JSON-ready)."""
        out: dict[str, dict[str, list[int]]] = {}
        for (instance, kind), cell in self._cells.items():
            out.setdefault(instance, {})[kind.value] = list(cell.run)
        return out

    def status(self, instance: str, kind: ProbeKind) -> ProbeStatus | None:
        """The current status of one kind on one instance, None before its first result."""
        cell = self._cells.get((instance, kind))
        return cell.status if cell is not None else None

    def statuses(self, instance: str) -> list[ProbeStatus]:
        """Every known status of one instance, in the order of :class:`ProbeKind`."""
        out = [self.status(instance, kind) for kind in ProbeKind]
        return [s for s in out if s is not None]

    def instances(self) -> list[str]:
        """The instances with at least one status, sorted."""
        return sorted({inst for inst, _ in self._cells})

    def snapshot(self) -> dict[str, list[ProbeStatus]]:
        """Every instance's statuses (``{i: [s.model_dump(mode="json") ...]}`` is the wire form)."""
        return {inst: self.statuses(inst) for inst in self.instances()}

    def load(self, snapshot: Mapping[str, Sequence[ProbeStatus | Mapping[str, Any]]]) -> None:
        """Replace every verdict with a published set (a follower gateway's view of the prober's)."""
        self._cells.clear()
        for instance, statuses in snapshot.items():
            for raw in statuses:
                status = raw if isinstance(raw, ProbeStatus) else ProbeStatus.model_validate(raw)
                self._cell(instance, status.kind).load(status)

    def forget(self, instance: str) -> None:
        """Drop an instance that left the fleet."""
        for key in [k for k in self._cells if k[0] == instance]:
            del self._cells[key]
