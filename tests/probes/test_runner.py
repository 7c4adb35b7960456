"""ProbeRunner: results carry the judgement, ids and clocks are injected, nothing ever raises."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime

import aiohttp
import numpy as np
import pytest
from aiohttp import web

from probes.baselines import BaselineStore
from probes.embedder import EmbedderUnavailable
from probes.runner import ProbeRunner
from probes.types import Target
from schemas.common import ProbeKind, ProbeVerdict
from schemas.probe import ProbeResult
from tests.probes.conftest import MODEL, fast_settings, fixed_app, serving, sim_app, streaming_app

WALL = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def _runner(session, embedder=None, **settings) -> ProbeRunner:
    ids = itertools.count()
    return ProbeRunner(fast_settings(**settings), session, embedder=embedder, baselines=BaselineStore(),
                       wall=lambda: WALL, new_id=lambda: f"p{next(ids)}")


def _run(app: web.Application, kind: ProbeKind, embedder=None, **settings) -> list[ProbeResult]:
    async def main():
        async with serving(app) as url, aiohttp.ClientSession() as session:
            runner = _runner(session, embedder, **settings)
            return [await runner.run(kind, Target("inst-1", MODEL, url)) for _ in range(2)]

    return asyncio.run(main())


def test_result_fields_come_from_target_clock_and_judgement() -> None:
    first, second = _run(sim_app(), ProbeKind.LATENCY)
    assert (first.probe_id, second.probe_id) == ("p0", "p1") and first.ts == WALL
    assert first.instance == "inst-1" and first.model == MODEL and first.kind is ProbeKind.LATENCY
    assert first.verdict is ProbeVerdict.OK and first.reason == "learning baseline (1/10)"
    assert first.latency_ms is not None and first.latency_ms >= 0 and first.value == first.latency_ms


def test_without_an_embedder_semantic_is_skipped() -> None:
    async def main():
        async with aiohttp.ClientSession() as session:
            runner = _runner(session)
            return runner.kinds(), await runner.run(ProbeKind.SEMANTIC, Target("i", MODEL, "http://127.0.0.1:9"))

    kinds, result = asyncio.run(main())
    assert kinds == [ProbeKind.SYNTAX, ProbeKind.LATENCY]
    assert result.verdict is ProbeVerdict.FAILED and result.error_class == "unavailable"


class _Broken:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def embed(self, texts: list[str]) -> np.ndarray:
        raise self.exc


@pytest.mark.parametrize(("exc", "error_class", "reason"), [
    (ZeroDivisionError("boom"), "internal", "probe crashed: ZeroDivisionError: boom"),
    (EmbedderUnavailable("not installed: torch"), "unavailable", "semantic probe unavailable: not installed: torch"),
])
def test_an_exception_in_a_check_is_a_failed_result(exc: Exception, error_class: str, reason: str) -> None:
    result, _ = _run(sim_app(), ProbeKind.SEMANTIC, embedder=_Broken(exc))
    assert result.verdict is ProbeVerdict.FAILED and result.error_class == error_class and result.reason == reason


NOT_FOUND = {"error": {"message": "The model `sim-model` does not exist.", "type": "invalid_request_error",
                       "param": "model", "code": "model_not_found"}}
BAD = [
    ("non-json", lambda: fixed_app(b"Internal error", content_type="text/plain"), "not_json", "body is not JSON"),
    ("invalid utf-8", lambda: fixed_app(b'{"x": "\xc3\x28"}'), "encoding", "body is not valid UTF-8"),
    ("50 MB", lambda: streaming_app(50 << 20), "too_large", "answer cut at the 1048576-byte cap"),
    ("slow drip", lambda: streaming_app(1000, 1, every_s=0.02, fill=b"{"), "timeout",
     "answer (HTTP 200) not complete within 0.3 s"),
    ("unknown model", lambda: fixed_app(NOT_FOUND, status=404), "http_status",
     "HTTP 404: The model `sim-model` does not exist."),
]


@pytest.mark.parametrize(("name", "app", "error_class", "reason"), BAD, ids=[b[0] for b in BAD])
def test_bad_instances_fail_the_syntax_probe_with_a_clear_reason(name, app, error_class, reason) -> None:
    result, _ = _run(app(), ProbeKind.SYNTAX, timeout_s=0.3)
    assert result.verdict is ProbeVerdict.FAILED and result.error_class == error_class
    assert result.reason.startswith(reason) and result.value == 0.0


@pytest.mark.parametrize(("name", "app", "error_class"), [(b[0], b[1], b[2]) for b in BAD if b[2] != "not_json"
                                                          and b[2] != "encoding"], ids=["50 MB", "drip", "404"])
def test_bad_instances_fail_the_latency_probe(name, app, error_class) -> None:
    result, _ = _run(app(), ProbeKind.LATENCY, timeout_s=0.3)
    assert result.verdict is ProbeVerdict.FAILED and result.error_class == error_class
