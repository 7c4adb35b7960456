"""The metrics faults seen from outside: bodies the router's parser must refuse, then normal again."""

from __future__ import annotations

import pytest

from router_core.state.parse import MetricsParseError, parse_engine_metrics
from sim.exposition import with_invalid_utf8, with_out_of_range_gauges
from tests.sim.test_fault_http import Client, _run

LIVE = (b'# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine="0",model_name="m"} 2.0\n'
        b'vllm:num_requests_waiting_total 9.0\nvllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.1\n')


def test_spoilers_rewrite_only_the_routing_gauges() -> None:
    assert with_out_of_range_gauges(LIVE) == LIVE.replace(b"} 2.0", b"} -5.0").replace(b"} 0.1", b"} 1.7")
    bad = with_invalid_utf8(LIVE)
    with pytest.raises(UnicodeDecodeError):
        bad.decode()
    assert bad.replace(b"\xff", b"") == LIVE


@pytest.mark.parametrize(("kind", "reason"), [("invalid-utf8-metrics", "decode"),
                                              ("out-of-range-metrics", "out_of_range")])
def test_a_metrics_fault_is_refused_by_the_router_parser_until_cleared(spec, serve, kind: str, reason: str):
    async def scenario(c: Client) -> tuple[bytes, bytes, dict]:
        _, record = await c.fault(kind=kind)
        async with c.http.get(f"{c.url}/metrics") as resp:
            hostile = await resp.read()
        _, listed = await c.faults()
        await c.faults("DELETE", f"/{record['id']}")
        async with c.http.get(f"{c.url}/metrics") as resp:
            return hostile, await resp.read(), listed

    hostile, healthy, listed = _run(spec, serve, scenario)
    with pytest.raises(MetricsParseError) as caught:
        parse_engine_metrics(hostile)
    assert caught.value.reason == reason
    assert listed["active"][0]["requests_affected"] == 1
    g = parse_engine_metrics(healthy)
    assert g.queue == 0.0 and g.adjustments == ()


def test_metrics_fault_kinds_are_accepted_by_the_admin_api(spec, serve) -> None:
    async def scenario(c: Client) -> list[int]:
        return [(await c.fault(kind=k, duration_s=5))[0] for k in ("invalid-utf8-metrics", "out-of-range-metrics")]

    assert _run(spec, serve, scenario) == [201, 201]
