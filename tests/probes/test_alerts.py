import asyncio
import json
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from probes.alerts import AlertManager, WebhookNotifier
from probes.alerts.notify import MAX_QUEUED
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config.probes import AlertRule, AlertSettings, AlertWebhook
from schemas.probe import ProbeResult, ProbeStatus
from schemas.records import RouterEvent

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
FAIL, OK = ProbeVerdict.FAILED, ProbeVerdict.OK
AM_ALERT_FIELDS = {"status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint"}
AM_FIELDS = {"version", "groupKey", "status", "receiver", "groupLabels", "commonLabels", "commonAnnotations",
             "externalURL", "alerts"}


class Fake:
    """Clocks, a recording POST and a recording sleep for one manager."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.now = 0.0
        self.last: float | None = 0.0
        self.statuses = list(statuses or [])
        self.posts: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.delays: list[float] = []
        self.events: list[RouterEvent] = []

    def wall(self) -> datetime:
        return T0 + timedelta(seconds=self.now)

    async def post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
        self.posts.append((url, json.loads(body), headers))
        return self.statuses.pop(0) if self.statuses else 200

    async def sleep(self, dt: float) -> None:
        self.delays.append(dt)
        await asyncio.sleep(0)

    def manager(self, rules: list[AlertRule], webhooks: list[AlertWebhook] | None = None) -> AlertManager:
        hooks = [AlertWebhook(url="http://hook.test/a")] if webhooks is None else webhooks
        return AlertManager(AlertSettings(rules=rules, webhooks=hooks), on_event=self.events.append,
                            post=self.post, wall=self.wall, clock=lambda: self.now,
                            last_result_at=lambda: self.last, external_url="http://gw:8080", sleep=self.sleep)


def result(verdict: ProbeVerdict, *, kind: ProbeKind = ProbeKind.SEMANTIC, value: float = 0.4,
           latency_ms: float = 100.0, instance: str = "i1") -> ProbeResult:
    return ProbeResult(probe_id="p", ts=T0, instance=instance, model="m1", kind=kind, verdict=verdict,
                       value=value, threshold=0.65, latency_ms=latency_ms, reason="drifted" if verdict is FAIL else "")


def status(verdict: ProbeVerdict, kind: ProbeKind = ProbeKind.SEMANTIC) -> ProbeStatus:
    return ProbeStatus(kind=kind, verdict=verdict, since=T0)


DRIFT = AlertRule(name="Drift", kind=ProbeKind.SEMANTIC, verdict=FAIL, severity="critical", for_s=60.0,
                  summary="answers drifted", labels={"team": "llm"})


async def step(fake: Fake, mgr: AlertManager, at: float) -> list[str]:
    fake.now = at
    out = [t.action for t in await mgr.evaluate()]
    await mgr.drain()
    return out


def test_a_verdict_rule_is_pending_for_for_s_then_fires_and_resolves() -> None:
    fake = Fake()

    async def main() -> None:
        mgr = fake.manager([DRIFT])
        mgr.observe(result(FAIL), status(FAIL))
        assert await step(fake, mgr, 0.0) == []
        assert [a["state"] for a in mgr.active()] == ["pending"]
        assert await step(fake, mgr, 59.0) == [] and fake.posts == []
        assert await step(fake, mgr, 60.0) == ["firing"]
        active = mgr.active()
        assert len(active) == 1 and active[0]["state"] == "firing" and active[0]["instance"] == "i1"
        assert active[0]["since"] == (T0 + timedelta(seconds=60)).isoformat() and active[0]["value"] == 0.4
        mgr.observe(result(OK, value=0.9), status(OK))
        assert await step(fake, mgr, 90.0) == ["resolved"]
        assert mgr.active() == []
        await mgr.close()

    asyncio.run(main())
    firing, resolved = (p[1] for p in fake.posts)
    assert AM_FIELDS <= set(firing) and firing["version"] == "4" and firing["status"] == "firing"
    assert firing["externalURL"] == "http://gw:8080" and firing["receiver"]
    alert = firing["alerts"][0]
    assert AM_ALERT_FIELDS <= set(alert)
    assert alert["labels"] == {"alertname": "Drift", "instance": "i1", "model": "m1", "kind": "semantic",
                               "severity": "critical", "team": "llm"}
    assert alert["annotations"]["summary"] == "answers drifted" and "drifted" in alert["annotations"]["description"]
    assert alert["startsAt"] == "2026-12-01T12:01:00Z" and alert["endsAt"] == "0001-01-01T00:00:00Z"
    assert resolved["status"] == "resolved" and resolved["alerts"][0]["endsAt"] == "2026-12-01T12:01:30Z"
    assert resolved["alerts"][0]["fingerprint"] == alert["fingerprint"] and firing["groupKey"] == resolved["groupKey"]
    assert [(e.kind, e.severity, e.instance, e.model) for e in fake.events] == [
        ("alert", "error", "i1", "m1"), ("alert", "info", "i1", "m1")]
    assert fake.events[0].message == "firing: Drift on i1 (semantic): answers drifted"
    assert fake.events[1].message.startswith("resolved: Drift ")
    assert fake.events[0].value == 0.4


def test_repeated_observations_make_one_alert_and_one_notification() -> None:
    fake = Fake()

    async def main() -> None:
        mgr = fake.manager([DRIFT.model_copy(update={"for_s": 0.0})])
        for at in (0.0, 5.0, 10.0):
            mgr.observe(result(FAIL), status(FAIL))
            mgr.observe(result(FAIL), None)  # None: the last status seen still holds
            await step(fake, mgr, at)
        assert len(mgr.active()) == 1
        await mgr.close()

    asyncio.run(main())
    assert len(fake.posts) == 1 and len(fake.events) == 1


def test_a_still_firing_alert_is_resent_every_repeat_interval() -> None:
    fake = Fake()

    async def main() -> None:
        mgr = fake.manager([DRIFT.model_copy(update={"for_s": 0.0, "repeat_interval_s": 100.0})])
        mgr.observe(result(FAIL), status(FAIL))
        assert [await step(fake, mgr, t) for t in (0.0, 50.0, 99.0, 100.0, 150.0, 200.0)] == [
            ["firing"], [], [], ["repeat"], [], ["repeat"]]
        await mgr.close()

    asyncio.run(main())
    assert [p[1]["status"] for p in fake.posts] == ["firing"] * 3
    assert len(fake.events) == 1  # a repeat is a notification, not a new event


def test_a_pending_alert_whose_condition_ends_never_notifies() -> None:
    fake = Fake()

    async def main() -> None:
        mgr = fake.manager([DRIFT])
        mgr.observe(result(FAIL), status(FAIL))
        await step(fake, mgr, 0.0)
        mgr.observe(result(OK), status(OK))
        await step(fake, mgr, 30.0)
        await step(fake, mgr, 90.0)
        await mgr.close()

    asyncio.run(main())
    assert fake.posts == [] and fake.events == []


def test_a_metric_rule_needs_k_of_n() -> None:
    fake = Fake()
    slow = AlertRule(name="Slow", kind=ProbeKind.LATENCY, metric="latency_ms", op=">", threshold=1000.0, k=2, n=3)

    async def main() -> None:
        mgr = fake.manager([slow])
        lat = ProbeKind.LATENCY
        mgr.observe(result(OK, kind=lat, latency_ms=1500.0), None)
        assert await step(fake, mgr, 0.0) == []
        mgr.observe(result(OK, kind=lat, latency_ms=500.0), None)
        mgr.observe(result(OK, kind=ProbeKind.SYNTAX, latency_ms=5000.0), None)  # another kind: not this rule
        assert await step(fake, mgr, 1.0) == []
        mgr.observe(result(OK, kind=lat, latency_ms=1200.0), None)
        assert await step(fake, mgr, 2.0) == ["firing"]
        assert mgr.active()[0]["value"] == 1200.0 and mgr.active()[0]["severity"] == "warning"
        await mgr.close()

    asyncio.run(main())
    assert fake.events[0].severity == "warning"


def test_the_watchdog_fires_on_silence_and_resolves_when_results_come_back() -> None:
    fake = Fake()
    fake.last = None
    dog = AlertRule(name="Silent", kind="watchdog", for_s=120.0, severity="critical", summary="silence")

    async def main() -> None:
        mgr = fake.manager([dog])
        assert await step(fake, mgr, 100.0) == []
        assert await step(fake, mgr, 121.0) == ["firing"]
        assert mgr.active()[0]["instance"] is None and mgr.active()[0]["kind"] == "watchdog"
        fake.last = 125.0
        assert await step(fake, mgr, 126.0) == ["resolved"]
        assert await step(fake, mgr, 240.0) == []
        assert await step(fake, mgr, 250.0) == ["firing"]
        await mgr.close()

    asyncio.run(main())
    labels = fake.posts[0][1]["alerts"][0]["labels"]
    assert labels == {"alertname": "Silent", "kind": "watchdog", "severity": "critical"}
    assert [e.severity for e in fake.events] == ["error", "info", "error"]


def test_delivery_retries_with_backoff_and_stops_at_the_first_2xx() -> None:
    fake = Fake(statuses=[503, 500, 429, 200])
    hook = AlertWebhook(url="http://hook.test/a", backoff_s=0.5, max_backoff_s=1.5, bearer_token_env="RL_TEST_TOKEN")

    async def main() -> None:
        mgr = fake.manager([DRIFT.model_copy(update={"for_s": 0.0})], [hook])
        mgr.observe(result(FAIL), status(FAIL))
        await step(fake, mgr, 0.0)
        assert mgr.notifiers[0].delivered == 1 and mgr.notifiers[0].dropped == 0
        await mgr.close()

    asyncio.run(main())
    assert fake.delays == [0.5, 1.0, 1.5] and len(fake.posts) == 4
    assert fake.posts[0][2]["Content-Type"] == "application/json"


def test_a_refusing_or_dead_receiver_drops_after_its_bounds() -> None:
    async def main() -> tuple[WebhookNotifier, WebhookNotifier, int]:
        calls = 0

        async def refuse(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
            return 400

        async def dead(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
            nonlocal calls
            calls += 1
            raise ConnectionRefusedError("down")

        async def nosleep(dt: float) -> None:
            pass

        a = WebhookNotifier(AlertWebhook(url="http://a.test"), refuse, sleep=nosleep)
        b = WebhookNotifier(AlertWebhook(url="http://b.test", max_attempts=3), dead, sleep=nosleep)
        for n in (a, b):
            n.submit(b"{}")
            await n.drain()
            await n.close()
        return a, b, calls

    a, b, calls = asyncio.run(main())
    assert (a.attempts, a.dropped, b.attempts, b.dropped, calls) == (1, 1, 3, 1, 3)


def test_a_receiver_down_for_long_does_not_queue_without_bound() -> None:
    async def main() -> WebhookNotifier:
        async def hang(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
            await asyncio.Event().wait()
            return 200

        n = WebhookNotifier(AlertWebhook(url="http://x.test"), hang)
        for _ in range(MAX_QUEUED + 5):
            n.submit(b"{}")
        await n.close()
        return n

    assert asyncio.run(main()).dropped == 5


def test_evaluation_does_not_wait_for_a_hung_receiver() -> None:
    async def main() -> None:
        async def hang(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
            await asyncio.Event().wait()
            return 200

        mgr = AlertManager(AlertSettings(rules=[DRIFT.model_copy(update={"for_s": 0.0})],
                                         webhooks=[AlertWebhook(url="http://x.test")]),
                           on_event=lambda e: None, post=hang, clock=lambda: 0.0, last_result_at=lambda: 0.0)
        mgr.observe(result(FAIL), status(FAIL))
        assert [t.action for t in await asyncio.wait_for(mgr.evaluate(), 5)] == ["firing"]
        await mgr.close()

    asyncio.run(main())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_real_receiver_down_then_503_then_up_gets_the_notification_exactly_once() -> None:
    port = free_port()
    hits: list[int] = []
    accepted: list[dict[str, Any]] = []

    async def receive(request: web.Request) -> web.Response:
        body = await request.json()
        hits.append(1)
        if len(hits) <= 2:
            return web.Response(status=503)
        accepted.append(body)
        return web.Response(status=200)

    async def main() -> int:
        app = web.Application()
        app.router.add_post("/hook", receive)
        runner = web.AppRunner(app)
        await runner.setup()
        backoffs = 0

        async def sleep(dt: float) -> None:
            nonlocal backoffs
            backoffs += 1
            if backoffs == 2:  # two attempts hit a closed port; now the receiver comes up
                await web.TCPSite(runner, "127.0.0.1", port).start()
            await asyncio.sleep(0.01)

        hook = AlertWebhook(url=f"http://127.0.0.1:{port}/hook", backoff_s=0.01, max_attempts=20, timeout_s=5.0)
        mgr = AlertManager(AlertSettings(rules=[DRIFT.model_copy(update={"for_s": 0.0})], webhooks=[hook]),
                           on_event=lambda e: None, clock=lambda: 0.0, last_result_at=lambda: 0.0,
                           external_url="http://gw", sleep=sleep)
        try:
            mgr.observe(result(FAIL), status(FAIL))
            await mgr.evaluate()
            await asyncio.wait_for(mgr.drain(), 30)
            return mgr.notifiers[0].attempts
        finally:
            await mgr.close()
            await runner.cleanup()

    attempts = asyncio.run(main())
    assert attempts == 5 and len(hits) == 3 and len(accepted) == 1
    body = accepted[0]
    assert AM_FIELDS <= set(body) and AM_ALERT_FIELDS <= set(body["alerts"][0])
    assert body["alerts"][0]["labels"]["alertname"] == "Drift"


def test_a_worse_verdict_holds_a_degraded_rule_and_a_kindless_rule_splits_by_kind() -> None:
    fake = Fake()
    slow = AlertRule(name="Slow", kind=ProbeKind.LATENCY, verdict=ProbeVerdict.DEGRADED)
    anything = AlertRule(name="AnyFailed", verdict=FAIL, severity="info")

    async def main() -> None:
        mgr = fake.manager([slow, anything])
        mgr.observe(result(FAIL, kind=ProbeKind.LATENCY), status(FAIL, ProbeKind.LATENCY))
        mgr.observe(result(FAIL, kind=ProbeKind.SYNTAX), status(FAIL, ProbeKind.SYNTAX))
        assert sorted(await step(fake, mgr, 0.0)) == ["firing"] * 3
        assert sorted((a["name"], a["kind"]) for a in mgr.active()) == [
            ("AnyFailed", "latency"), ("AnyFailed", "syntax"), ("Slow", "latency")]
        assert len({a["fingerprint"] for a in mgr.active()}) == 3
        await mgr.close()

    asyncio.run(main())
    assert sorted(e.severity for e in fake.events) == ["info", "info", "warning"]
