"""The bindings' mirror (pure bookkeeping, clock injected): reads local, writes queued, corrected by Redis."""

from __future__ import annotations

from router_core.shared.redis_bindings import BindingMirror, BindWrite


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def test_bind_answers_from_the_mirror_and_queues_one_write_per_key() -> None:
    clock = Clock()
    m = BindingMirror(clock)
    assert m.bind("s1", "inst-a", 60) == "inst-a"
    clock.now += 1
    assert m.bind("s1", "inst-b", 60) == "inst-a"  # held
    assert m.drain() == [BindWrite("s1", "inst-a", 60_000, "nx")]  # TTL renewed by the second bind
    assert m.drain() == []


def test_rebind_overwrites_and_wins_over_a_queued_bind() -> None:
    m = BindingMirror(Clock())
    m.bind("s1", "inst-a", 60)
    m.rebind("s1", "inst-b", 60)
    assert m.bind("s1", "inst-c", 60) == "inst-b"
    assert [(w.value, w.mode) for w in m.drain()] == [("inst-b", "set")]


def test_redis_holding_another_value_corrects_the_mirror() -> None:
    m = BindingMirror(Clock())
    m.bind("s1", "mine", 60)
    [w] = m.drain()
    m.confirmed(w, "theirs")  # another replica bound it first
    assert m.get("s1") == "theirs" and m.conflicts == 1
    m.confirmed(BindWrite("s1", "theirs", 60_000, "nx"), "theirs")
    assert m.conflicts == 1


def test_learned_bindings_and_expiry() -> None:
    clock = Clock()
    m = BindingMirror(clock)
    m.learned("s1", "inst-x", 2000)
    assert m.bind("s1", "inst-y", 60) == "inst-x"
    m.learned("s2", "inst-x", 500)
    clock.now += 1
    assert m.get("s2") is None and m.bind("s2", "inst-y", 60) == "inst-y"


def test_failed_writes_are_owed_again_and_the_mirror_is_bounded() -> None:
    m = BindingMirror(Clock(), max_keys=2)
    m.rebind("s1", "a", 60)
    m.bind("s2", "b", 60)
    writes = m.drain()
    m.bind("s1", "z", 60)  # queued meanwhile as nx: the failed set stays a set
    m.restore(writes)
    assert sorted((w.key, w.mode) for w in m.drain()) == [("s1", "set"), ("s2", "nx")]
    m.bind("s3", "c", 60)  # the least recently used goes, with its write
    assert m.get("s2") is None and m.get("s1") == "a" and m.get("s3") == "c"


def test_bindings_read_at_start_do_not_replace_what_this_replica_bound_meanwhile() -> None:
    m = BindingMirror(Clock(), max_keys=3)
    m.rebind("s1", "moved-here", 60)
    m.warm("s1", "old", 60_000)
    m.warm("s2", "old", 60_000)
    assert m.get("s1") == "moved-here" and m.get("s2") == "old" and not m.full
    m.warm("s3", "x", 60_000)
    m.warm("s4", "x", 60_000)
    assert m.full and m.get("s4") is None
