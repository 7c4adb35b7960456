"""The prober honours each instance's ``probes`` override: off, fewer kinds, rarer; and sends ``upstream_model``."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from app.run.prober import Prober, overrides_of, targets_of
from schemas.common import ProbeKind
from schemas.config import RouteLensConfig
from tests.probes.conftest import completion, serving


def config_of(instances: list[dict[str, Any]], **probes: Any) -> RouteLensConfig:
    return RouteLensConfig.model_validate({"fleet": {"instances": instances},
                                           "probes": {"kinds": ["syntax", "latency"], **probes}})


def inst(iid: str, url: str = "http://127.0.0.1:9", **kw: Any) -> dict[str, Any]:
    return {"id": iid, "model": "m", "url": url, **kw}


def test_targets_leave_out_unprobed_instances_and_carry_the_upstream_name() -> None:
    config = config_of([inst("a"), inst("off", probes=False), inst("hosted", upstream_model="prov/m")])
    assert [(t.instance, t.sent_model) for t in targets_of(config, {})] == [("a", "m"), ("hosted", "prov/m")]


def test_kinds_and_interval_become_the_schedules_terms() -> None:
    config = config_of([inst("a"), inst("b", probes={"kinds": ["latency", "semantic"], "interval_s": 60}),
                        inst("c", probes={"interval_s": 61})], kinds=list(ProbeKind), interval_s=30)
    kinds_of, every = overrides_of(config, [ProbeKind.SYNTAX, ProbeKind.LATENCY])  # semantic unavailable here
    assert kinds_of == {"b": [ProbeKind.LATENCY]} and every == {"b": 2, "c": 3}


@pytest.mark.parametrize(("override", "words"), [
    ({"kinds": ["semantic"]}, "kinds ['semantic'] not in probes.kinds ['syntax', 'latency']"),
    ({"interval_s": 5}, "interval_s 5 is shorter than probes.interval_s 30"),
])
def test_an_override_beyond_the_probes_section_is_refused_naming_the_field(override: dict[str, Any],
                                                                          words: str) -> None:
    with pytest.raises(ValidationError) as info:  # at load, before any prober starts
        config_of([inst("a"), inst("b", probes=override)])
    assert "fleet.instances[1].probes (b)" in str(info.value) and words in str(info.value)


def test_a_fleet_with_nothing_to_probe_is_never_reported_out_of_date(tmp_path: Path) -> None:
    now = [0.0]
    config = config_of([inst("off", probes=False)], interval_s=1)
    prober = Prober(config, db_path=str(tmp_path / "t.duckdb"), emit=lambda _: None, apply=None,
                    registry=CollectorRegistry(), clock=lambda: now[0])
    prober._started_at = 0.0
    now[0] = 1000.0
    assert prober.targets == [] and prober.problem() is None
    rare = config_of([inst("a", probes={"interval_s": 10})], interval_s=1, timeout_s=1)
    prober = Prober(rare, db_path=str(tmp_path / "t.duckdb"), emit=lambda _: None, apply=None,
                    registry=CollectorRegistry(), clock=lambda: now[0])
    prober._started_at = 0.0
    now[0] = 25.0  # 25 s of silence: 3 of its 10 s periods have not passed
    assert prober.problem() is None
    now[0] = 32.0
    assert prober.problem() == "no probe result for 32 s"


def test_a_running_prober_probes_each_instance_as_configured(tmp_path: Path) -> None:
    """A real prober against three loopback instances for about 1.2 s (a probe round every 0.2 s)."""
    seen: Counter[tuple[str, str, str]] = Counter()

    def app(name: str) -> web.Application:
        async def chat(request: web.Request) -> web.Response:
            body = await request.json()
            kind = "syntax" if body["messages"][0]["content"] == "Hello world" else "latency"
            seen[(name, kind, body["model"])] += 1
            return web.json_response(completion())

        a = web.Application()
        a.router.add_post("/v1/chat/completions", chat)
        return a

    async def main() -> None:
        async with serving(app("a")) as a, serving(app("off")) as off, serving(app("hosted")) as hosted:
            config = config_of([inst("a", a), inst("off", off, engine="external", probes=False),
                                inst("hosted", hosted, engine="external", upstream_model="prov/m",
                                     probes={"kinds": ["syntax"], "interval_s": 0.4})],
                               interval_s=0.2, timeout_s=1.0)
            prober = Prober(config, db_path=str(tmp_path / "t.duckdb"), emit=lambda _: None, apply=None,
                            registry=CollectorRegistry(), rng=random.Random(1))
            await prober.start()
            deadline = time.monotonic() + 1.2
            while time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await prober.stop()

    asyncio.run(main())
    assert not any(name == "off" for name, _, _ in seen)  # never probed
    assert {(n, k, m) for n, k, m in seen if n == "hosted"} == {("hosted", "syntax", "prov/m")}  # syntax only
    a_rounds, hosted_rounds = seen[("a", "syntax", "m")], seen[("hosted", "syntax", "prov/m")]
    assert a_rounds >= 4 and seen[("a", "latency", "m")] >= 4
    assert 1 <= hosted_rounds <= a_rounds // 2 + 1  # every other round
