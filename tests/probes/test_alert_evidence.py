"""A crash is no drift: an instance that gives no answer fails its health probe, not a semantic-drift alert."""

from __future__ import annotations

import asyncio
import socket
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest

from probes.alerts import AlertManager
from probes.baselines import BaselineStore
from probes.embedder import MiniLMEmbedder
from probes.evidence import is_evidence
from probes.runner import ProbeRunner
from probes.types import Target
from probes.verdicts import VerdictBoard
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config.probes import AlertSettings
from schemas.probe import ProbeResult
from tests.probes.conftest import MODEL, fast_settings, fixed_app, serving, sim_app

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DRIFT, SYNTAX = "RouteLensProbeSemanticDrift", "RouteLensProbeSyntaxFailed"


def refused_url() -> str:
    """A loopback port nothing listens on: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def firing_after(results: list[ProbeResult]) -> list[set[str]]:
    """The configuration's default rules fed ``results`` one by one through the verdicts: what fires after each."""
    board, now = VerdictBoard(), [0.0]
    mgr = AlertManager(AlertSettings(), on_event=lambda _: None, wall=lambda: T0 + timedelta(seconds=now[0]),
                       clock=lambda: now[0], last_result_at=lambda: now[0])

    async def main() -> list[set[str]]:
        out = []
        for r in results:
            now[0] += 5.0
            mgr.observe(r, board.observe(r))
            await mgr.evaluate()
            out.append({a["name"] for a in mgr.active() if a["state"] == "firing"})
        await mgr.close()
        return out

    return asyncio.run(main())


def probe(embedder: MiniLMEmbedder, rounds: list[tuple[str, bool]]) -> list[ProbeResult]:
    """Per round, the syntax and semantic probes of one instance at ``url`` (``drift``: the sim drifts first)."""
    async def main() -> list[ProbeResult]:
        out = []
        async with aiohttp.ClientSession() as session:
            runner = ProbeRunner(fast_settings(), session, embedder=embedder, baselines=BaselineStore())
            for url, drift in rounds:
                if drift:
                    async with session.post(f"{url}/admin/faults", json={"kind": "drift"}) as resp:
                        assert resp.status == 201
                for kind in (ProbeKind.SYNTAX, ProbeKind.SEMANTIC):
                    out.append(await runner.run(kind, Target("inst-3", MODEL, url)))
        return out

    return asyncio.run(main())


def test_an_instance_refusing_connections_raises_no_semantic_drift_alert(embedder: MiniLMEmbedder) -> None:
    async def healthy_url() -> tuple[list[ProbeResult], list[ProbeResult]]:
        async with serving(sim_app()) as url:
            crashed = await asyncio.to_thread(probe, embedder, [(refused_url(), False)] * 3)
            back = await asyncio.to_thread(probe, embedder, [(url, False)] * 2)
            return crashed, back

    crashed, back = asyncio.run(healthy_url())
    semantic = [r for r in crashed if r.kind is ProbeKind.SEMANTIC]
    assert all(r.verdict is ProbeVerdict.FAILED and r.error_class == "connect" for r in semantic)
    assert all(r.verdict is ProbeVerdict.OK for r in back)
    fired = firing_after(crashed + back)
    assert not any(DRIFT in f for f in fired), fired  # not while down, not while its verdict recovers
    assert SYNTAX in fired[len(crashed) - 1]  # the health probe says it: the instance does not answer


def test_an_instance_answering_503_raises_no_semantic_drift_alert(embedder: MiniLMEmbedder) -> None:
    async def main() -> list[ProbeResult]:
        async with serving(fixed_app({"error": {"message": "engine dead"}}, status=503)) as url:
            return await asyncio.to_thread(probe, embedder, [(url, False)] * 3)

    results = asyncio.run(main())
    assert {r.error_class for r in results if r.kind is ProbeKind.SEMANTIC} == {"http_status"}
    fired = firing_after(results)
    assert DRIFT not in fired[-1] and SYNTAX in fired[-1]


def test_a_drifting_instance_still_raises_the_semantic_drift_alert(embedder: MiniLMEmbedder) -> None:
    async def main() -> list[ProbeResult]:
        async with serving(sim_app()) as url:
            return await asyncio.to_thread(probe, embedder, [(url, True), (url, False), (url, False)])

    results = asyncio.run(main())
    semantic = [r for r in results if r.kind is ProbeKind.SEMANTIC]
    assert all(r.verdict is ProbeVerdict.FAILED and r.error_class == "drift" for r in semantic)
    fired = firing_after(results)
    assert DRIFT in fired[-1] and SYNTAX not in fired[-1]  # it answers, fluently and off topic


def test_a_drift_alert_yields_to_a_crash_and_returns_with_the_drift() -> None:
    def res(verdict: ProbeVerdict, error_class: str | None, value: float | None) -> ProbeResult:
        return ProbeResult(probe_id="p", ts=T0, instance="i", model="m", kind=ProbeKind.SEMANTIC, verdict=verdict,
                           value=value, threshold=0.65, error_class=error_class)

    drift, down = res(ProbeVerdict.FAILED, "drift", 0.3), res(ProbeVerdict.FAILED, "connect", None)
    fired = firing_after([drift, drift, down, down, drift])
    assert [DRIFT in f for f in fired] == [False, True, False, False, True]


@pytest.mark.parametrize(("kind", "error_class", "verdict", "expected"), [
    (ProbeKind.SEMANTIC, "drift", ProbeVerdict.FAILED, True),
    (ProbeKind.SEMANTIC, "connect", ProbeVerdict.FAILED, False),
    (ProbeKind.SEMANTIC, "http_status", ProbeVerdict.FAILED, False),
    (ProbeKind.SEMANTIC, "unavailable", ProbeVerdict.FAILED, False),
    (ProbeKind.SEMANTIC, None, ProbeVerdict.FAILED, True),
    (ProbeKind.SEMANTIC, None, ProbeVerdict.OK, True),
    (ProbeKind.LATENCY, "off_baseline", ProbeVerdict.DEGRADED, True),
    (ProbeKind.LATENCY, "timeout", ProbeVerdict.FAILED, False),
    (ProbeKind.SYNTAX, "connect", ProbeVerdict.FAILED, True),
])
def test_is_evidence(kind: ProbeKind, error_class: str | None, verdict: ProbeVerdict, expected: bool) -> None:
    r = ProbeResult(probe_id="p", ts=T0, instance="i", model="m", kind=kind, verdict=verdict, error_class=error_class)
    assert is_evidence(r) is expected
