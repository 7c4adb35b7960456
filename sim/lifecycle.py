"""What faults do to an instance's process: crash, hang, restart, frozen metrics, flapping gauges.

:class:`LifecycleMixin` gives :class:`sim.server.SimInstance` its fault book, the middleware that
makes a crashed or hung instance misbehave at the HTTP level, and the ``/metrics`` view under
freeze-metrics and flap. A crashed (or restarting) instance keeps its port but drops every
connection to the OpenAI API, ``/health`` and ``/metrics``; only its admin API (``/admin/*``)
keeps answering, so ``routelens sim faults URL --clear`` can always end a fault. The port stays
open for that reason: a :class:`Lifecycle` (the fleet's) is only asked to listen again on recovery.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Literal, Protocol

from aiohttp import web

from schemas.fleet import InstanceSpec
from sim.clock import Clock
from sim.engine import SimEngine
from sim.exposition import InstanceMetrics, with_invalid_utf8, with_out_of_range_gauges
from sim.faults import PROCESS_STATE_KINDS, FaultBook, FaultKind, FaultRecord, FaultSpec

__all__ = ["Lifecycle", "LifecycleMixin", "Listener"]

Listener = Callable[[Literal["start", "end"], FaultRecord], None]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_DOWN = (FaultKind.CRASH, FaultKind.RESTART)
_GRACE_S = 0.05  # lets the admin response that ordered a crash reach its client first


class Lifecycle(Protocol):
    """Closes and reopens an instance's listening port; both are idempotent."""

    async def down(self) -> None:
        """Stop listening and drop every connection."""
        ...

    async def up(self) -> None:
        """Listen again on the same address."""
        ...


class _Reported:
    """The gauges as ``/metrics`` reports them: the engine's, except where a flap fault overrides."""

    def __init__(self, owner: LifecycleMixin) -> None:
        self._owner = owner

    @property
    def waiting(self) -> int:
        return self._owner.engine.waiting

    @property
    def running(self) -> int:
        return self._owner.engine.running

    @property
    def kv_usage(self) -> float:
        level = self._owner.faults.flap_level()
        return self._owner.engine.kv_usage if level is None else level

    @property
    def warmup(self) -> float:
        return self._owner.engine.warmup


class LifecycleMixin:
    """Fault handling shared by every simulated instance (see the module docstring)."""

    spec: InstanceSpec
    engine: SimEngine
    metrics: InstanceMetrics

    def setup_lifecycle(self, clock: Clock, lifecycle: Lifecycle | None, on_fault: Listener | None) -> None:
        """Create the fault book; call once from ``__init__``."""
        self.clock = clock
        self.lifecycle = lifecycle
        self._listener = on_fault
        self.faults = FaultBook(self.spec.id, clock, self._on_fault)
        self._released: dict[str, asyncio.Event] = {}
        self._frozen: dict[str, bytes] = {}
        self._snapshots: deque[tuple[float, bytes]] = deque(maxlen=512)
        self._tasks: set[asyncio.Task[None]] = set()

    def new_metrics(self) -> InstanceMetrics:
        """A fresh registry (counters restart from zero, as after a process restart); overrides kept."""
        metrics = InstanceMetrics(self.spec.model, _Reported(self), fault_kinds=tuple(k.value for k in FaultKind),
                                  active_faults=lambda kind: len(self.faults.active(FaultKind(kind))))
        previous = getattr(self, "metrics", None)
        if previous is not None:
            metrics.overrides = previous.overrides
        return metrics

    def is_down(self) -> bool:
        """True while a crash or a restart keeps the process away."""
        return any(r.kind in _DOWN for r in self.faults.active())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def inject(self, spec: FaultSpec) -> FaultRecord:
        """Start a fault now; crash and restart take the port down just after this returns."""
        self.faults.expire()
        if spec.kind is FaultKind.HANG:
            event = asyncio.Event()
        record = self.faults.inject(spec)
        if spec.kind is FaultKind.HANG:
            self._released[record.id] = event
        elif spec.kind is FaultKind.FREEZE_METRICS:
            self._frozen[record.id] = self.metrics.render()
            self._snapshots.append((self.clock.now(), self._frozen[record.id]))
        elif spec.kind in _DOWN:
            self._spawn(self._go_down(record))
        return record

    def clear(self, record: FaultRecord | None = None) -> list[FaultRecord]:
        """End one active fault, or every active fault; return those ended."""
        self.faults.expire()
        ended = [record] if record is not None else self.faults.active()
        ended = [r for r in ended if r in self.faults.active()]
        for r in ended:
            self.faults.end(r, "cleared")
        return ended

    def _on_fault(self, event: Literal["start", "end"], record: FaultRecord) -> None:
        if self._listener is not None:
            self._listener(event, record)
        if event != "end":
            return
        if record.kind is FaultKind.HANG and record.id in self._released:
            self._released.pop(record.id).set()
        self._frozen.pop(record.id, None)
        if record.kind in _DOWN and not self.is_down():
            self._spawn(self._recover())

    async def _go_down(self, record: FaultRecord) -> None:
        # The port stays open (the admin API must answer); the middleware drops everything else.
        await asyncio.sleep(_GRACE_S)
        if record.kind is FaultKind.RESTART:
            await asyncio.sleep(record.spec.duration_s or 0.5)
            self.faults.end(record, "restarted")

    async def _recover(self) -> None:
        if self.lifecycle is not None:
            await self.lifecycle.up()
        self.engine.restart()
        for r in self.faults.active():
            if r.kind in PROCESS_STATE_KINDS:
                self.faults.end(r, "restart")
        self.metrics = self.new_metrics()

    async def tick(self) -> None:
        """Expire faults that ran out (a crash's recovery among them) and keep lagging snapshots."""
        self.faults.expire()
        if any(r.spec.lag_s for r in self.faults.active(FaultKind.FREEZE_METRICS)):
            now = self.clock.now()
            if not self._snapshots or now - self._snapshots[-1][0] >= 0.25:
                self._snapshots.append((now, self.metrics.render()))

    async def close(self) -> None:
        """Cancel background work (release hung requests)."""
        for event in self._released.values():
            event.set()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def scrape(self) -> bytes:
        """The ``/metrics`` body as served: :meth:`_scrape_body`, then made hostile by the metrics faults."""
        body = self._scrape_body()
        for kind, spoil in ((FaultKind.OUT_OF_RANGE_METRICS, with_out_of_range_gauges),
                            (FaultKind.INVALID_UTF8_METRICS, with_invalid_utf8)):
            if records := self.faults.active(kind):
                records[-1].requests_affected += 1
                body = spoil(body)
        return body

    def _scrape_body(self) -> bytes:
        """The ``/metrics`` body: live, or frozen at onset, or as it was ``lag_s`` ago."""
        self.faults.expire()
        live = self.metrics.render()
        frozen = self.faults.active(FaultKind.FREEZE_METRICS)
        if self.faults.flap_level() is not None:
            self.faults.active(FaultKind.FLAP)[-1].requests_affected += 1
        if not frozen:
            return live
        record = frozen[-1]
        record.requests_affected += 1
        now = self.clock.now()
        self._snapshots.append((now, live))
        if record.spec.lag_s is None:
            return self._frozen.get(record.id, live)
        old = [text for at, text in self._snapshots if at <= now - record.spec.lag_s]
        return old[-1] if old else self._snapshots[0][1]

    @web.middleware
    async def fault_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Crash and restart drop connections; hang holds them until the fault ends, then drops them.

        ``/admin/*`` is exempt: faults can be listed and cleared on a crashed or hung instance.
        """
        if request.path.startswith("/admin/"):
            return await handler(request)
        self.faults.expire()
        active = self.faults.active()
        if not active:
            return await handler(request)
        if request.path == "/v1/chat/completions":
            for r in active:
                r.requests_seen += 1
                if r.kind in (FaultKind.SLOW, FaultKind.LEAK, FaultKind.KV_PRESSURE):
                    r.requests_affected += 1
        hang = self.faults.active(FaultKind.HANG)
        if self.is_down() or hang:
            for r in active:
                if r.kind in _DOWN or r.kind is FaultKind.HANG:
                    r.requests_affected += 1
            if hang and hang[-1].id in self._released:
                await self._released[hang[-1].id].wait()
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=503)
        return await handler(request)
