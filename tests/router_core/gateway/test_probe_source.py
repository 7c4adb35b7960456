"""The probe verdict feed and its follower: what a gateway that does not probe takes from one that does."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from router_core.gateway.probe_source import VerdictFollower, feed_body
from schemas.probe import ProbeStatus

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def status(kind: str, verdict: str, seconds: int = 0) -> ProbeStatus:
    return ProbeStatus(kind=kind, verdict=verdict, since=T0.replace(second=seconds), value=0.4, threshold=0.65)


def test_the_follower_applies_only_verdicts_that_changed_and_republishes_them() -> None:
    applied: list[tuple[str, str, str]] = []
    follower = VerdictFollower("http://127.0.0.1:1", lambda s, i: applied.append((i, s.kind.value, s.verdict.value)),
                               clock=lambda: 0.0)  # time stands still: the feed's age is served as read
    first = feed_body({"a": [status("semantic", "ok"), status("syntax", "ok")], "b": [status("semantic", "ok")]},
                      [], 1.5, "store")
    assert follower.take(first) == 3 and len(applied) == 3
    assert follower.take(first) == 0 and len(applied) == 3  # the same feed again changes nothing
    changed = {"a": [status("semantic", "failed", 30), status("syntax", "ok")], "b": [status("semantic", "ok")]}
    second = feed_body(changed, [{"name": "RouteLensProbeSemanticDrift", "instance": "a"}], 0.2, "store")
    assert follower.take(second) == 1 and applied[-1] == ("a", "semantic", "failed")
    assert follower.alerts() == [{"name": "RouteLensProbeSemanticDrift", "instance": "a"}]
    feed = follower.feed()
    assert feed["source"] == "follow:http://127.0.0.1:1" and feed["last_result_age_s"] == 0.2
    assert [s["verdict"] for s in feed["verdicts"]["a"]] == ["failed", "ok"]  # semantic, syntax


def test_the_follower_hands_on_every_moved_probe_count_and_republishes_the_counts() -> None:
    """Every probe result, not only verdict changes, reaches the breakers' recovery (seed 003: ten passes in a row)."""
    counts: list[tuple[str, str, int, int]] = []
    follower = VerdictFollower("http://127.0.0.1:1", lambda s, i: None, clock=lambda: 0.0,
                               runs=lambda i, k, n, ok: counts.append((i, k, n, ok)))
    verdicts = {"a": [status("syntax", "ok")]}
    follower.take(feed_body(verdicts, [], 1.0, "prober", {"a": {"syntax": [4, 4], "semantic": [4, 3]}}))
    follower.take(feed_body(verdicts, [], 1.0, "prober", {"a": {"syntax": [4, 4], "semantic": [4, 3]}}))
    follower.take(feed_body(verdicts, [], 1.0, "prober", {"a": {"syntax": [5, 5], "semantic": [4, 3]}}))
    assert counts == [("a", "syntax", 4, 4), ("a", "semantic", 4, 3), ("a", "syntax", 5, 5)]
    assert follower.feed()["runs"] == {"a": {"syntax": [5, 5], "semantic": [4, 3]}}


def test_an_unreachable_feed_is_a_problem_not_an_exception() -> None:
    from app.run.procs import free_port

    follower = VerdictFollower(f"http://127.0.0.1:{free_port()}", lambda s, i: None, interval_s=0.1)

    async def run() -> int:
        await follower.start()
        try:
            return await follower.poll_once()
        finally:
            await follower.stop()

    assert asyncio.run(run()) == 0
    problem = follower.problem()
    assert problem is not None and "unavailable" in problem
