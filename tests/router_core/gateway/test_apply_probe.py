"""A probe verdict reaching a gateway: newer readings show in its state; a recovery forgets learned quality once."""

from __future__ import annotations

from datetime import UTC, datetime

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config import RouteLensConfig
from schemas.probe import ProbeStatus
from tests.router_core.gateway.test_forwarding import MemoryHooks

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_a_newer_reading_shows_and_a_recovery_forgets_quality_once() -> None:
    config = RouteLensConfig.model_validate({"fleet": {"instances": [{"id": "a", "model": "m",
                                                                       "url": "http://127.0.0.1:9"}]}})
    gw = Gateway(config, build_router(config), MemoryHooks())
    forgotten: list[str] = []
    gw.quality.forget = lambda instance: forgotten.append(instance) or True  # type: ignore[method-assign]

    def status(value: float, reason: str) -> ProbeStatus:
        return ProbeStatus(kind=ProbeKind.SEMANTIC, verdict=ProbeVerdict.OK, since=T0, value=value,
                           threshold=0.65, reason=reason, flaps=2)  # back to ok after a drift

    gw.apply_probe(status(0.81, "similarity 0.81"), "a")
    assert forgotten == ["a"]
    gw.apply_probe(status(0.84, "similarity 0.84"), "a")  # the next probe: the same verdict, a newer reading
    assert forgotten == ["a"]  # not forgotten again: feedback learned since the recovery stays
    shown = gw.view.probe_of("a", ProbeKind.SEMANTIC)
    assert shown is not None and shown.value == 0.84 and shown.reason == "similarity 0.84"
