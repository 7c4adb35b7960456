"""The router's view of live instance state: scraped gauges plus its own observations.

Staleness is pessimistic: an instance never scraped has no gauges (constraints then fail it), and
one whose last good scrape is older than ``stale_after_s`` is marked stale.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from router_core.metrics_parse import EngineGauges
from schemas.fleet import InstanceSnapshot, InstanceSpec

__all__ = ["StateView"]


@dataclass
class _InstanceState:
    spec: InstanceSpec
    base: InstanceSnapshot
    last_ok_mono: float | None = None
    outcomes: deque[bool] = field(default_factory=lambda: deque(maxlen=50))


class StateView:
    """Latest known state of every instance of the fleet.

    Args:
        specs: The fleet.
        stale_after_s: Age after which a scrape no longer counts as fresh.
        clock: Monotonic seconds (injected).
        wall: Current UTC time (injected).
    """

    def __init__(
        self,
        specs: Iterable[InstanceSpec],
        *,
        stale_after_s: float = 5.0,
        clock: Callable[[], float],
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._clock = clock
        self._wall = wall
        self._stale_after_s = stale_after_s
        self._states = {
            s.id: _InstanceState(s, InstanceSnapshot(instance=s.id, model=s.model, engine=s.engine))
            for s in specs
        }

    def update(self, instance: str, gauges: EngineGauges | None, error: str | None = None) -> None:
        """Record one scrape: its gauges, or the error that made it fail (gauges kept as they were)."""
        state = self._states[instance]
        if gauges is None:
            state.base = state.base.model_copy(update={"scrape_error": error})
            return
        state.last_ok_mono = self._clock()
        state.base = state.base.model_copy(
            update={
                "scraped_at": self._wall(),
                "engine": gauges.engine,
                "queue": gauges.queue,
                "running": gauges.running,
                "kv_cache_usage": gauges.kv_cache_usage,
                "warmup_progress": gauges.warmup_progress,
                "scrape_error": None,
            }
        )

    def record_result(self, instance: str, ok: bool) -> None:
        """Record the outcome of a request the router sent to ``instance``."""
        self._states[instance].outcomes.append(ok)

    def snapshot(self) -> dict[str, InstanceSnapshot]:
        """Return every instance's state as of now (age, staleness and error rate filled in)."""
        now = self._clock()
        out: dict[str, InstanceSnapshot] = {}
        for iid, state in self._states.items():
            age = None if state.last_ok_mono is None else max(now - state.last_ok_mono, 0.0)
            errors = state.outcomes
            out[iid] = state.base.model_copy(
                update={
                    "age_s": age,
                    "stale": age is None or age > self._stale_after_s,
                    "error_rate": (errors.count(False) / len(errors)) if errors else None,
                }
            )
        return out
