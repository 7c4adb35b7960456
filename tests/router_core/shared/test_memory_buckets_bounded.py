"""MemoryShared's token buckets: the full ones are dropped once the map is large, so it stays bounded.

Before, every client throttle key (``client:<key>``) kept its bucket for ever, with one worker and in
the Redis backend's local fallback: 100k client keys held 21.6 MB however long ago they came. A full
bucket is the same as a missing one, so dropping it changes no answer; a bucket in use keeps its state.
"""

from __future__ import annotations

from router_core.shared.base import MemoryShared


def test_a_hundred_thousand_clients_gone_quiet_leave_a_bounded_map_and_a_bucket_in_use_its_state() -> None:
    now = [0.0]
    shared = MemoryShared(lambda: now[0])
    assert shared.take_now("client:busy", 0.01, 3) == (True, 0.0)
    for _ in range(2):
        assert shared.take_now("client:busy", 0.01, 3)[0]
    refused, wait = shared.take_now("client:busy", 0.01, 3)  # empty: the next token in 100 s
    assert not refused and 99.0 < wait <= 100.0
    for i in range(100_000):  # 5 tokens/s, burst 10: each full again 0.2 s after its one request
        assert shared.take_now(f"client:{i}", 5.0, 10.0)[0]
    assert len(shared._buckets) <= 100_001  # none full yet: all kept
    now[0] = 61.0  # a minute later
    assert shared.take_now("client:new", 5.0, 10.0)[0]
    assert len(shared._buckets) <= 10_000  # the quiet clients' full buckets went
    assert shared.tokens("client:0") is None
    taken, wait = shared.take_now("client:busy", 0.01, 3)  # 0.61 token refilled: still refused
    assert not taken and 38.0 < wait < 40.0
    assert shared.take_now("client:7", 5.0, 10.0) == (True, 0.0)  # a dropped bucket answers as a full one
    assert shared.tokens("client:7") == 9.0


def test_the_map_is_not_scanned_on_every_request() -> None:
    now = [0.0]
    shared = MemoryShared(lambda: now[0], prune_buckets=1000)
    for i in range(50_000):  # every bucket in use (none full again): nothing can be dropped
        now[0] += 1e-6
        shared.take_now(f"client:{i}", 0.001, 5.0)
    assert len(shared._buckets) == 50_000
    assert shared.bucket_scans <= 7  # at 1001, then each time the map doubled: 2002, 4004, ... 32032
    scans = shared.bucket_scans
    for i in range(1000):  # the same clients again: the map does not grow, no scan (within the minute)
        shared.take_now(f"client:{i}", 0.001, 5.0)
    assert shared.bucket_scans == scans
