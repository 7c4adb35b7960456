"""The demo's day waits for the gateway's semantic intents: a first run's fit took a minute, and the day's
first requests all waited for it, then came at once (breakers opened, the error rate broke).

A real HTTP server on 127.0.0.1 answers ``/health`` and ``/v1/router/state`` as the gateway does.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any

import pytest
from aiohttp import web

from app.run.demo_day import wait_for_intents
from tests.serve_thread import in_thread


class Gateway:
    """``/health`` answers the statuses in turn (the last one from then on); None: no ``intents`` key."""

    def __init__(self, *statuses: str | None, cache: str = "no cache yet") -> None:
        self.statuses, self.cache, self.reads = list(statuses), cache, 0

    async def health(self, request: web.Request) -> web.Response:
        status = self.statuses[min(self.reads, len(self.statuses) - 1)]
        self.reads += 1
        body: dict[str, Any] = {"status": "ok"} if status is None else {"status": "ok", "intents": status}
        if status == "failed":
            return web.json_response({**body, "status": "degraded", "reason": "intents fit failed: OSError: disk"},
                                     status=503)
        return web.json_response(body)

    async def state(self, request: web.Request) -> web.Response:
        return web.json_response({"intents": {"status": "fitting", "routes": 5, "examples": 120, "cache": self.cache}})


def serve(gw: Gateway) -> AbstractContextManager[str]:
    app = web.Application()
    app.router.add_get("/health", gw.health)
    app.router.add_get("/v1/router/state", gw.state)
    return in_thread(app)


def wait(url: str, **kw: Any) -> tuple[bool, list[str]]:
    said: list[str] = []
    kw.setdefault("poll_s", 0.01)
    return wait_for_intents(url, stop=threading.Event(), say=said.append, **kw), said


def test_a_first_run_waits_for_the_fit_and_says_so() -> None:
    gw = Gateway("fitting", "fitting", "fitting", "ready")
    with serve(gw) as url:
        ok, said = wait(url)
    assert ok and gw.reads == 4
    assert said[0] == ("fitting the semantic intents (5 routes, 120 examples; no cache yet: a first run, about a "
                       "minute) before the day begins ...")
    assert said[1].startswith("semantic intents ready after ") and said[1].endswith(" s: the day begins")


def test_a_cached_fit_says_what_the_cache_held() -> None:
    with serve(Gateway("fitting", "ready", cache="5 of 5 routes cached")) as url:
        ok, said = wait(url)
    assert ok and "(5 routes, 120 examples; 5 of 5 routes cached)" in said[0] and len(said) == 2


@pytest.mark.parametrize("status", [None, "ready"])
def test_ready_or_not_configured_goes_on_at_once_without_a_word(status) -> None:
    gw = Gateway(status)
    with serve(gw) as url:
        assert wait(url) == (True, []) and gw.reads == 1


def test_a_failed_fit_is_said_and_the_day_goes_on() -> None:
    with serve(Gateway("fitting", "failed")) as url:
        ok, said = wait(url)
    assert ok and len(said) == 2
    assert said[1] == ("the semantic intents' fit failed (intents fit failed: OSError: disk): the day goes on, its "
                       "requests for auto trying the fit again (each waits for it): see the gateway's log")


def test_a_fit_that_never_ends_is_an_error_after_the_timeout(capsys) -> None:
    ticks = iter(range(1000))
    with serve(Gateway("fitting")) as url:
        ok, said = wait(url, timeout_s=5, clock=lambda: float(next(ticks)))
    assert not ok and len(said) == 1
    assert "error: the gateway's semantic intents were still fitting after 5 s" in capsys.readouterr().err


def test_a_gateway_that_died_ends_the_wait(capsys) -> None:
    with serve(Gateway("fitting")) as url:
        ok, _ = wait(url, alive=lambda: False)
    assert not ok and "the gateway stopped before its semantic intents were fitted" in capsys.readouterr().err


def test_ctrl_c_ends_the_wait_quietly(capsys) -> None:
    stop = threading.Event()
    gw = Gateway("fitting")
    with serve(gw) as url:
        threading.Timer(0.3, stop.set).start()
        assert not wait_for_intents(url, stop=stop, say=lambda line: None, poll_s=0.05)
    assert gw.reads >= 2 and capsys.readouterr().err == ""
