"""A query parameter given twice is a 400 naming it, on every read route of the store (and through the proxy).

Before, the routes took the first value silently (``dict(request.query)``), and ``compare`` the
last: ``?model=a&model=b`` answered for ``a`` alone, a question the client did not ask. A
parameter that takes a list (``unset``, ``shares``) takes its repeats instead, as its commas.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import aiohttp
import pytest
from aiohttp import web

from ingest.http_api.proxy import add_store_proxy
from ingest.pipeline.emitter import TraceEmitter
from tests.ingest.http_api.test_read_token import run_with_api
from tests.ingest.http_api.test_unset_filter_http import get, url
from tests.ingest.test_unset_filter import END, T0
from tests.serve_thread import on_loop

__all__ = ["url"]  # the fixture (a store serving the unset-filter traces), imported for pytest

WINDOW = f"start={quote(T0.isoformat())}&end={quote(END.isoformat())}"


@pytest.mark.parametrize(("path", "param"), [
    ("/v1/traces?model=a&model=b", "model"),
    ("/v1/traces?limit=5&limit=5", "limit"),  # the same value twice too: one value is what the route takes
    (f"/v1/analytics/buckets?{WINDOW}&bucket=1h&bucket=1d", "bucket"),
    (f"/v1/analytics/window?{WINDOW}&start={quote(T0.isoformat())}", "start"),
    (f"/v1/analytics/traffic?{WINDOW}&rule=r&rule=s", "rule"),
    (f"/v1/analytics/constraints?{WINDOW}&end={quote(END.isoformat())}", "end"),
    ("/v1/analytics/misroutes?limit=1&limit=2", "limit"),
    ("/v1/feedback?request_id=r1&request_id=r2", "request_id"),
    ("/v1/feedback?request_id=r1&settle=false&settle=true", "settle"),
    (f"/v1/events?{WINDOW}&kind=breaker&kind=mode", "kind"),
    (f"/v1/probes?{WINDOW}&instance=a&instance=b", "instance"),
    (f"/v1/snapshots?{WINDOW}&limit=1&limit=2", "limit"),
    (f"/v1/quarantine?{WINDOW}&limit=1&limit=2", "limit"),
    (f"/v1/analytics/latches?{WINDOW}&instance=a&instance=b", "instance"),
    (f"/v1/analytics/groups?{WINDOW}&by=arm&by=version", "by"),
    (f"/v1/analytics/experiment-series?{WINDOW}&a=x&b=y&a=z", "a"),
    (f"/v1/analytics/compare?{WINDOW}&a=x&b=y&by=arm&b=z", "b"),
    (f"/v1/analytics/compare?{WINDOW}&a=x&b=y&start={quote(T0.isoformat())}", "start"),
])
def test_a_parameter_given_twice_is_a_400_naming_it(url: str, path: str, param: str) -> None:
    status, body = get(url, path)
    assert status == 400, body
    assert body["error"] == {"message": f"parameter `{param}` is given twice", "type": "invalid_request_error",
                             "param": param, "code": "invalid_parameter"}


def test_a_list_takes_its_repeats_as_its_commas(url: str) -> None:
    joined = get(url, "/v1/traces?unset=instance,model&limit=1000")
    assert get(url, "/v1/traces?unset=instance&unset=model&limit=1000") == joined and joined[0] == 200
    compare = f"/v1/analytics/compare?{WINDOW}&a=x&b=y&by=arm"
    commas = get(url, f"{compare}&shares=0.7,0.3")
    assert commas[0] == 200 and commas[1]["shares"] == [0.7, 0.3]
    assert get(url, f"{compare}&shares=0.7&shares=0.3") == commas


def test_a_parameter_the_route_does_not_take_is_ignored_given_twice_or_not(url: str) -> None:
    status, page = get(url, "/v1/traces?colour=red&colour=blue&limit=1")
    assert status == 200 and len(page["items"]) == 1


def test_the_proxy_leaves_it_to_the_store_and_delivers_nothing_first(tmp_path: Path) -> None:
    settled: list[int] = []

    async def settle() -> None:
        settled.append(1)

    async def check(base: str, em: TraceEmitter) -> None:
        app = web.Application()
        add_store_proxy(app, base, lambda rid: None, settle=settle)
        async with on_loop(app) as url, aiohttp.ClientSession() as session:
            path = f"{url}/v1/feedback?request_id=r1"
            async with session.get(path + "&settle=true&settle=false") as twice:
                assert twice.status == 400 and (await twice.json())["error"]["param"] == "settle"
            assert settled == []  # a request the store refuses: nothing delivered for it
            async with session.get(path) as once:
                assert once.status == 200
                assert settled == [1]

    run_with_api(tmp_path, None, check)
