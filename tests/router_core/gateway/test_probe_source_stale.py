"""A followed prober that stops answering: its results age, its silence raises RouteLensProberSilent.

The follower polls a real loopback stub of the prober (``GET /v1/probes/verdicts``) that answers,
then hangs the way a ``kill -STOP``-ped prober does (the connection is taken, nothing comes back),
or is gone; time moves only on the injected clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiohttp import web

from app.run.procs import free_port
from probes.alerts.manager import AlertManager
from probes.alerts.rules import fingerprint
from router_core.gateway.probe_source import VerdictFollower, feed_body
from schemas.config.probes import AlertRule, AlertSettings
from schemas.probe import ProbeStatus
from sim.clock import VirtualClock

T = TypeVar("T")
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SYNTAX_ALERT = {  # what the prober's GET /v1/alerts lists (probes.alerts.manager._describe)
    "name": "RouteLensProbeSyntaxFailed", "severity": "critical", "state": "firing", "instance": "a",
    "model": "m", "kind": "syntax", "since": T0.isoformat(), "value": None,
    "summary": "invalid, empty or garbled answers to the syntax probe",
    "labels": {"alertname": "RouteLensProbeSyntaxFailed", "instance": "a", "model": "m", "kind": "syntax",
               "severity": "critical"},
    "fingerprint": fingerprint("RouteLensProbeSyntaxFailed", "a", "syntax"),
}


def feed(age: float | None = 2.209) -> dict[str, Any]:
    status = ProbeStatus(kind="syntax", verdict="failed", since=T0, value=0.0, threshold=1.0)
    return feed_body({"a": [status]}, [SYNTAX_ALERT], age, "prober")


class StubProber:
    """The prober's feed on loopback: answers ``body``, or, ``wedged``, takes the request and never answers."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.wedged = False
        self._release = asyncio.Event()
        self.url = ""

    async def verdicts(self, request: web.Request) -> web.Response:
        if self.wedged:
            await self._release.wait()  # a stopped process: the kernel accepted the connection, nobody answers
        return web.json_response(self.body)

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[StubProber]:
        app = web.Application()
        app.router.add_get("/v1/probes/verdicts", self.verdicts)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        try:
            yield self
        finally:
            self._release.set()
            await runner.cleanup()


def wall_of(clock: VirtualClock) -> Callable[[], datetime]:
    return lambda: datetime.fromtimestamp(clock.epoch(), UTC)


def follower_of(url: str, clock: VirtualClock, **kw: Any) -> VerdictFollower:
    return VerdictFollower(url, lambda s, i: None, interval_s=0.1, clock=clock.now, wall=wall_of(clock), **kw)


def run(follower: VerdictFollower, body: Callable[[], Awaitable[T]]) -> T:
    """``body`` in an event loop, then the follower's session closed; polls only when ``body`` says (no start())."""

    async def go() -> T:
        try:
            return await body()
        finally:
            await follower.stop()

    return asyncio.run(go())


def watchdogs(alerts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a for a in alerts if a["name"] == "RouteLensProberSilent"]


def test_a_wedged_prober_ages_its_last_result_and_raises_the_silent_alert_after_its_window() -> None:
    clock = VirtualClock(start=1000.0, epoch0=T0.timestamp())
    stub = StubProber(feed(2.209))

    async def body() -> None:
        async with stub.serving():
            follower = follower_of(stub.url, clock)
            try:
                assert await follower.poll_once() == 1
                assert follower.feed()["last_result_age_s"] == 2.209 and follower.problem() is None
                assert follower.alerts() == [SYNTAX_ALERT]  # answering: the prober's alerts as it serves them

                stub.wedged = True
                clock.advance(1.0)
                assert await follower.poll_once() == 0  # times out (the follower's own 1 s request timeout)
                problem = follower.problem()  # a timeout says what it waited for (it had read '(TimeoutError: )')
                assert problem is not None and problem.endswith("(TimeoutError: no answer within 1 s)")
                assert "since 2026-12-01T12:00:01+00:00" in problem

                clock.advance(116.0)  # 117 s since the last answer: its result is 119.209 s old
                assert follower.feed()["last_result_age_s"] == 119.209
                listed = follower.alerts()
                assert watchdogs(listed) == []
                [stale] = listed  # the prober's last alerts stay, marked as of its last answer
                assert stale["name"] == "RouteLensProbeSyntaxFailed" and stale["as_of"] == T0.isoformat()
                assert "as of 2026-12-01T12:00:00+00:00" in stale["summary"]

                clock.advance(1.0)  # its result is 120.209 s old: the watchdog's 120 s have passed
                assert follower.feed()["last_result_age_s"] == 120.209
                listed = follower.alerts()
                [silent] = watchdogs(listed)
                assert silent["state"] == "firing" and silent["severity"] == "critical"
                assert silent["kind"] == "watchdog" and silent["instance"] is None and silent["value"] == 120.209
                assert silent["since"] == "2026-12-01T12:01:57.791000+00:00"  # when its result turned 120 s old
                assert f"the prober at {stub.url} has not answered since 2026-12-01T12:00:01+00:00" \
                       in silent["summary"]
                assert "(TimeoutError: no answer within 1 s); no probe result for 120 s" in silent["summary"]
                assert [a["name"] for a in listed] == ["RouteLensProberSilent", "RouteLensProbeSyntaxFailed"]
                assert follower.feed()["alerts"] == listed  # a follower of this gateway sees the same

                stub.wedged = False  # it answers again: its own word replaces the gateway's
                clock.advance(15.0)
                assert await follower.poll_once() == 0
                assert follower.problem() is None and follower.alerts() == [SYNTAX_ALERT]
                assert follower.feed()["last_result_age_s"] == 2.209
            finally:
                await follower.stop()

    asyncio.run(body())


def test_a_prober_that_never_answers_is_silent_from_when_the_gateway_started_following_it() -> None:
    clock = VirtualClock(start=50.0, epoch0=T0.timestamp())
    follower = follower_of(f"http://127.0.0.1:{free_port()}", clock)

    async def poll_at(*seconds: float) -> list[list[dict[str, Any]]]:
        seen = []
        for s in seconds:
            clock.advance(s)
            await follower.poll_once()
            seen.append(follower.alerts())
        return seen

    early, late = run(follower, lambda: poll_at(119.0, 1.0))
    assert early == [] and follower.feed()["last_result_age_s"] is None
    [silent] = late
    assert silent["name"] == "RouteLensProberSilent" and silent["since"] == "2026-12-01T12:02:00+00:00"
    assert "has not answered since 2026-12-01T12:01:59+00:00" in silent["summary"]  # its first failed poll
    assert "ClientConnectorError" in silent["summary"]


def test_the_gateway_s_silent_alert_is_shaped_like_the_prober_s_own() -> None:
    clock = VirtualClock(start=0.0, epoch0=T0.timestamp())

    async def posted(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
        return 200

    manager = AlertManager(AlertSettings(), on_event=lambda e: None, post=posted, wall=wall_of(clock),
                           clock=clock.now, last_result_at=lambda: None)
    follower = follower_of(f"http://127.0.0.1:{free_port()}", clock)
    clock.advance(120.0)
    asyncio.run(manager.evaluate())
    [theirs] = manager.active()
    run(follower, follower.poll_once)  # refused: the prober never answered since the follower began
    [mine] = follower.alerts()
    assert mine.keys() == theirs.keys()
    same = ("name", "severity", "state", "instance", "model", "kind", "since", "labels", "fingerprint")
    assert {k: mine[k] for k in same} == {k: theirs[k] for k in same}
    assert mine["fingerprint"] == fingerprint("RouteLensProberSilent", "", "watchdog")


def test_the_window_and_the_alert_come_from_the_configured_watchdog_rule() -> None:
    clock = VirtualClock(start=0.0, epoch0=T0.timestamp())
    rule = AlertRule(name="FleetProberQuiet", kind="watchdog", for_s=30.0, severity="warning",
                     labels={"team": "llm"}, summary="quiet prober")
    custom = follower_of(f"http://127.0.0.1:{free_port()}", clock, alert_rules=[rule])
    without = follower_of(f"http://127.0.0.1:{free_port()}", clock,
                          alert_rules=[r for r in AlertSettings().rules if r.kind != "watchdog"])
    clock.advance(30.0)
    [alert] = custom.alerts()
    assert alert["name"] == "FleetProberQuiet" and alert["severity"] == "warning"
    assert alert["labels"] == {"alertname": "FleetProberQuiet", "kind": "watchdog", "severity": "warning",
                               "team": "llm"}
    assert alert["summary"].startswith("quiet prober: the prober at ") and "no answer yet" in alert["summary"]
    clock.advance(3600.0)
    assert without.alerts() == []  # no watchdog rule: the gateway raises none either
    assert without.feed()["last_result_age_s"] is None


def test_a_copy_of_the_prober_s_own_silent_alert_gives_way_to_the_gateway_s() -> None:
    clock = VirtualClock(start=0.0, epoch0=T0.timestamp())
    follower = follower_of(f"http://127.0.0.1:{free_port()}", clock)
    own = {**SYNTAX_ALERT, "name": "RouteLensProberSilent", "instance": None, "model": None, "kind": "watchdog",
           "fingerprint": fingerprint("RouteLensProberSilent", "", "watchdog")}
    body = feed(130.0)  # the prober answered, silent itself for 130 s, and said so
    body["alerts"] = [own, SYNTAX_ALERT]
    follower.take(body)
    assert follower.alerts() == [own, SYNTAX_ALERT]  # it answers: its word
    clock.advance(5.0)
    run(follower, follower.poll_once)  # then it does not
    names = [(a["name"], a.get("as_of")) for a in follower.alerts()]
    assert names == [("RouteLensProberSilent", None), ("RouteLensProbeSyntaxFailed", T0.isoformat())]
    assert follower.alerts()[0]["value"] == 135.0
