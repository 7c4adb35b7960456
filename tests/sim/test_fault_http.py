"""Each fault observed from outside an instance: its HTTP behaviour and its ``/metrics``."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import ClientSession

from schemas.config.sim import SimModelProfile, SimSettings
from sim.clock import VirtualClock
from sim.corpus import QUERIES, grade
from sim.server import build_instance_app
from tests.promtext import Samples, samples
from tests.sim.conftest import SPEC_LABELS

TICKET = next(q for q in QUERIES if q.cls == "ticket" and q.lang == "en")
BODY = {"model": "m", "messages": [{"role": "user", "content": TICKET.text}]}
SETTINGS = SimSettings(zero_delay=True, seed=3)


def _get(scrape: Samples, name: str, **labels: str) -> float:
    """A sample's value; 0 for a labelled counter series not created yet."""
    return scrape.value(name, default=0.0, **SPEC_LABELS, **labels)


class Client:
    def __init__(self, http: ClientSession, url: str) -> None:
        self.http, self.url = http, url

    async def chat(self, body: Any = BODY) -> tuple[int, Any, bytes]:
        async with self.http.post(f"{self.url}/v1/chat/completions", json=body) as resp:
            return resp.status, resp.headers.copy(), await resp.read()

    async def fault(self, **spec: Any) -> tuple[int, Any]:
        async with self.http.post(f"{self.url}/admin/faults", json=spec) as resp:
            return resp.status, await resp.json()

    async def metrics(self) -> Samples:
        async with self.http.get(f"{self.url}/metrics") as resp:
            return samples(await resp.text())

    async def faults(self, method: str = "GET", path: str = "") -> tuple[int, Any]:
        async with self.http.request(method, f"{self.url}/admin/faults{path}") as resp:
            return resp.status, await resp.json()


def _run(spec, serve, scenario, profile: SimModelProfile | None = None, settings: SimSettings = SETTINGS,
         clock: VirtualClock | None = None):
    async def main():
        app = build_instance_app(spec, profile or SimModelProfile(), settings, clock=clock)
        async with serve(app) as url, ClientSession() as http:
            return await scenario(Client(http, url))

    return asyncio.run(main())


def test_error_rate_one_gives_500s_and_the_fault_gauge_shows_it(spec, serve):
    async def scenario(c: Client):
        status, record = await c.fault(kind="error", rate=1.0)
        statuses = [(await c.chat())[0] for _ in range(3)]
        return status, record, statuses, await c.metrics(), await c.faults()

    status, record, statuses, metrics, (_, listing) = _run(spec, serve, scenario)
    assert status == 201 and record["kind"] == "error" and record["ended_at"] is None
    assert statuses == [500, 500, 500]
    assert _get(metrics, "routelens_sim_fault_active", kind="error") == 1.0
    assert _get(metrics, "routelens_sim_fault_active", kind="crash") == 0.0
    assert listing["active"][0]["requests_seen"] == 3 and listing["active"][0]["requests_affected"] == 3


def test_partial_error_rate_mixes_answers_deterministically(spec, serve):
    async def scenario(c: Client):
        await c.fault(kind="error", rate=0.5)
        return [(await c.chat())[0] for _ in range(40)]

    first = _run(spec, serve, scenario)
    assert set(first) == {200, 500} and _run(spec, serve, scenario) == first


def test_ratelimit_answers_429_with_retry_after(spec, serve, openai_schema):
    async def scenario(c: Client):
        await c.fault(kind="ratelimit", retry_after_s=7)
        return await c.chat()

    status, headers, body = _run(spec, serve, scenario)
    error = orjson.loads(body)
    assert status == 429 and headers["Retry-After"] == "7"
    openai_schema("ErrorResponse").validate(error)
    assert error["error"]["code"] == "rate_limit_exceeded"


def test_slow_multiplies_the_latency_the_histograms_record(spec, serve):
    async def scenario(c: Client):
        await c.chat()
        before = _get(await c.metrics(), "vllm:e2e_request_latency_seconds_sum")
        await c.fault(kind="slow", factor=4)
        await c.chat()
        after = _get(await c.metrics(), "vllm:e2e_request_latency_seconds_sum")
        return before, after - before

    first, slowed = _run(spec, serve, scenario, clock=VirtualClock())
    assert slowed == pytest.approx(4 * first)


def test_drift_answers_fluently_off_topic(spec, serve):
    async def scenario(c: Client):
        healthy = orjson.loads((await c.chat())[2])
        await c.fault(kind="drift")
        return healthy, orjson.loads((await c.chat())[2])

    healthy, drifted = _run(spec, serve, scenario)
    assert grade(TICKET, healthy["choices"][0]["message"]["content"]) != "off-topic"
    assert grade(TICKET, drifted["choices"][0]["message"]["content"]) == "off-topic"
    assert drifted["choices"][0]["finish_reason"] == "stop"


def test_garbage_is_invalid_json_or_mojibake(spec, serve):
    async def scenario(c: Client):
        await c.fault(kind="garbage")
        return [(await c.chat())[2] for _ in range(12)]

    bodies = _run(spec, serve, scenario)
    broken, garbled = 0, 0
    for raw in bodies:
        try:
            content = orjson.loads(raw)["choices"][0]["message"]["content"]
        except orjson.JSONDecodeError:
            broken += 1
            continue
        garbled += 1
        assert grade(TICKET, content) != "correct"
        assert "\ufffd" in content
    assert broken and garbled


def test_leak_raises_kv_usage_and_latency_over_minutes_while_answers_stay_valid(spec, serve):
    clock = VirtualClock()

    async def scenario(c: Client):
        await c.fault(kind="leak", rate=0.4)
        await c.chat()
        first = await c.metrics()
        clock.advance(60)
        status, _, body = await c.chat()
        return first, await c.metrics(), status, orjson.loads(body)

    first, later, status, body = _run(spec, serve, scenario, clock=clock)
    assert _get(first, "vllm:kv_cache_usage_perc") == 0.0
    assert _get(later, "vllm:kv_cache_usage_perc") == pytest.approx(0.4, abs=0.01)
    e2e_first = _get(first, "vllm:e2e_request_latency_seconds_sum")
    e2e_second = _get(later, "vllm:e2e_request_latency_seconds_sum") - e2e_first
    assert e2e_second == pytest.approx(e2e_first * (1 + 4 * 0.4), rel=0.01)
    assert status == 200 and body["choices"][0]["message"]["content"]


def test_freeze_metrics_serves_the_onset_snapshot_until_cleared(spec, serve):
    async def scenario(c: Client):
        await c.chat()
        status, record = await c.fault(kind="freeze-metrics")
        await c.chat()
        await c.chat()
        frozen = await c.metrics()
        await c.faults("DELETE", f"/{record['id']}")
        return frozen, await c.metrics()

    frozen, live = _run(spec, serve, scenario)
    assert _get(frozen, "vllm:request_success_total", finished_reason="stop") == 1.0
    assert _get(live, "vllm:request_success_total", finished_reason="stop") == 3.0


def test_lagging_metrics_are_as_old_as_the_lag(spec, serve):
    clock = VirtualClock()

    async def scenario(c: Client):
        await c.fault(kind="freeze-metrics", lag_s=4)
        seen = []
        for _ in range(6):
            await c.chat()
            seen.append(_get(await c.metrics(), "vllm:request_success_total", finished_reason="stop"))
            clock.advance(1)
        return seen

    # one request per second, scraped each second, shown four seconds late
    assert _run(spec, serve, scenario, clock=clock) == [0.0, 0.0, 0.0, 0.0, 1.0, 2.0]


def test_flap_moves_the_reported_kv_usage_across_the_threshold(spec, serve):
    clock = VirtualClock()

    async def scenario(c: Client):
        await c.fault(kind="flap", rate=0.95, period_s=2)
        high = _get(await c.metrics(), "vllm:kv_cache_usage_perc")
        clock.advance(1)
        return high, _get(await c.metrics(), "vllm:kv_cache_usage_perc")

    assert _run(spec, serve, scenario, clock=clock) == (0.95, 0.0)


def test_hang_holds_requests_until_cleared_then_drops_them(spec, serve):
    async def scenario(c: Client):
        _, record = await c.fault(kind="hang")
        hung = asyncio.create_task(c.chat())
        for _ in range(500):  # bounded: the hung request reaches the instance a moment later
            if (await c.faults())[1]["active"][0]["requests_seen"]:
                break
            await asyncio.sleep(0.01)
        assert (await c.faults())[1]["active"][0]["requests_seen"] == 1 and not hung.done()
        await c.faults("DELETE")
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await hung
        return (await c.chat())[0], (await c.faults())[1]["history"][0]

    status, record = _run(spec, serve, scenario)
    assert status == 200 and record["end_reason"] == "cleared" and record["ended_at"] >= record["started_at"]


def test_crash_without_a_port_keeper_drops_every_connection(spec, serve):
    async def scenario(c: Client):
        await c.fault(kind="crash")
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await c.chat()
        await c.faults("DELETE")
        return (await c.chat())[0]

    assert _run(spec, serve, scenario) == 200


BAD = [({"kind": "meltdown"}, "kind"), ({"kind": "error", "rate": 2}, None),
       ({"kind": "slow", "factor": "x"}, "factor"), ({"kind": "hang", "extra": 1}, "extra")]


@pytest.mark.parametrize(("body", "param"), BAD, ids=["kind", "rate", "factor", "extra"])
def test_bad_fault_requests_get_400_and_the_instance_keeps_serving(spec, serve, body, param):
    async def scenario(c: Client):
        return await c.fault(**body), await c.faults("DELETE", "/f99"), (await c.chat())[0]

    (status, error), (missing, _), after = _run(spec, serve, scenario)
    assert status == 400 and error["error"]["param"] == param and error["error"]["type"] == "invalid_request_error"
    assert missing == 404 and after == 200
