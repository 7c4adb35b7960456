from datetime import UTC, datetime, timedelta

import pytest

from probes.verdicts import Hysteresis, VerdictBoard
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config.probes import ProbeHysteresis
from schemas.probe import ProbeResult, ProbeStatus

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OK, DEG, FAIL = ProbeVerdict.OK, ProbeVerdict.DEGRADED, ProbeVerdict.FAILED


def result(i: int, verdict: ProbeVerdict, *, instance: str = "a", kind: ProbeKind = ProbeKind.SEMANTIC) -> ProbeResult:
    return ProbeResult(probe_id=f"p{i}", ts=T0 + timedelta(seconds=30 * i), instance=instance, model="m",
                       kind=kind, verdict=verdict, value=float(i), threshold=0.65,
                       reason="" if verdict is OK else f"bad {i}")


def feed(h: Hysteresis, verdicts: list[ProbeVerdict]) -> list[tuple[int, ProbeVerdict]]:
    """Feed results; the (index, new verdict) of every change."""
    changes = []
    for i, v in enumerate(verdicts):
        s = h.observe(result(i, v))
        if s is not None:
            changes.append((i, s.verdict))
    return changes


def hyst(k: int = 2, n: int = 3, m: int = 10) -> Hysteresis:
    return Hysteresis(ProbeHysteresis(fail_k=k, fail_n=n, recover_m=m), ProbeKind.SEMANTIC)


def test_first_result_sets_the_verdict_and_one_failure_does_not_move_it() -> None:
    assert feed(hyst(), [OK, FAIL, OK, OK, FAIL, OK]) == [(0, OK)]


def test_k_of_n_failures_fail_the_verdict() -> None:
    h = hyst()
    assert feed(h, [OK, FAIL, OK, FAIL]) == [(0, OK), (3, FAIL)]
    assert h.status is not None and h.status.since == T0 + timedelta(seconds=90)
    assert h.status.flaps == 1 and h.status.reason == "bad 3"


def test_recovery_needs_m_consecutive_passes() -> None:
    h = hyst()
    seq = [FAIL, FAIL] + [OK] * 9 + [FAIL] + [OK] * 10
    changes = feed(h, seq)
    assert changes == [(0, OK), (1, FAIL), (21, OK)]
    assert h.status is not None and h.status.flaps == 2 and h.status.since == T0 + timedelta(seconds=30 * 21)


def test_alternating_pass_fail_does_not_flap() -> None:
    h = hyst()
    changes = feed(h, [OK, FAIL] * 50)
    assert changes == [(0, OK), (3, FAIL)]
    assert h.status is not None and h.status.flaps == 1


def test_degraded_needs_k_of_n_and_recovers_after_m_passes() -> None:
    h = Hysteresis(ProbeHysteresis(fail_k=2, fail_n=3, recover_m=3), ProbeKind.LATENCY)
    assert feed(h, [OK, DEG, OK, OK, DEG, DEG, OK, OK, DEG, OK, OK, OK]) == [(0, OK), (5, DEG), (11, OK)]


def test_failed_recovers_to_degraded_when_the_passes_were_degraded() -> None:
    h = hyst(m=3)
    changes = feed(h, [FAIL, FAIL, DEG, DEG, DEG, OK, OK, OK])
    assert changes == [(0, OK), (1, FAIL), (4, DEG), (7, OK)]


def test_degraded_worsens_to_failed() -> None:
    assert feed(hyst(), [DEG, DEG, FAIL, FAIL]) == [(0, OK), (1, DEG), (3, FAIL)]


def test_the_status_carries_the_latest_value_but_keeps_since() -> None:
    h = hyst()
    feed(h, [OK, OK, OK])
    assert h.status is not None and h.status.value == 2.0 and h.status.since == T0


@pytest.mark.parametrize("k,n", [(1, 1), (3, 3), (2, 5)])
def test_k_of_n_bounds(k: int, n: int) -> None:
    h = hyst(k=k, n=n)
    seq = [OK] + [FAIL] * (k - 1)
    assert feed(h, seq) == [(0, OK)]
    h.observe(result(99, FAIL))
    assert h.status is not None and h.status.verdict is FAIL


def test_board_keeps_each_instance_and_kind_apart_and_round_trips() -> None:
    board = VerdictBoard(ProbeHysteresis())
    for i in range(3):
        board.observe(result(i, FAIL, instance="a", kind=ProbeKind.SYNTAX))
        board.observe(result(i, OK, instance="a", kind=ProbeKind.SEMANTIC))
        board.observe(result(i, OK, instance="b", kind=ProbeKind.SYNTAX))
    assert [(s.kind, s.verdict) for s in board.statuses("a")] == [(ProbeKind.SYNTAX, FAIL), (ProbeKind.SEMANTIC, OK)]
    assert board.status("b", ProbeKind.SYNTAX) is not None
    assert board.statuses("zzz") == []
    wire = {i: [s.model_dump(mode="json") for s in ss] for i, ss in board.snapshot().items()}
    follower = VerdictBoard()
    follower.load(wire)
    assert follower.snapshot() == board.snapshot()
    assert isinstance(follower.snapshot()["a"][0], ProbeStatus)
    board.forget("a")
    assert board.instances() == ["b"]


def test_a_loaded_failed_verdict_still_needs_m_passes() -> None:
    board = VerdictBoard(ProbeHysteresis(recover_m=2))
    board.load({"a": [ProbeStatus(kind=ProbeKind.SEMANTIC, verdict=FAIL, since=T0, flaps=4)]})
    assert board.observe(result(1, OK)) is None
    changed = board.observe(result(2, OK))
    assert changed is not None and changed.verdict is OK and changed.flaps == 5


@pytest.mark.parametrize("kind", [ProbeKind.SEMANTIC, ProbeKind.LATENCY])
def test_an_outage_moves_only_the_syntax_verdict(kind: ProbeKind) -> None:
    """A crash fails every probe; only the syntax verdict is about answering at all.

    The semantic and latency verdicts used to fail too and need ``recover_m`` passes after the
    instance came back, so Prometheus's drift and latency rules fired on a cured instance.
    """
    board = VerdictBoard(ProbeHysteresis(fail_k=2, fail_n=3, recover_m=10))

    def probe(i: int, k: ProbeKind, verdict: ProbeVerdict, error: str | None = None) -> None:
        board.observe(result(i, verdict, kind=k).model_copy(update={"error_class": error}))

    for i in range(3):
        probe(i, kind, OK)
        probe(i, ProbeKind.SYNTAX, OK)
    for i in range(3, 8):  # the instance is down: refused connections, then timeouts
        probe(i, kind, FAIL, "connect" if i < 5 else "timeout")
        probe(i, ProbeKind.SYNTAX, FAIL, "connect" if i < 5 else "timeout")
    assert board.status("a", ProbeKind.SYNTAX).verdict is FAIL  # type: ignore[union-attr]
    assert board.status("a", kind).verdict is OK  # type: ignore[union-attr]
    probe(8, kind, OK)
    assert board.status("a", kind).verdict is OK  # type: ignore[union-attr]
    assert board.run("a", kind) == (4, 4)  # the outage's results are not this kind's evidence
    own = "drift" if kind is ProbeKind.SEMANTIC else "off_baseline"
    probe(9, kind, FAIL, own)
    probe(10, kind, FAIL, own)  # its own judgement still fails it
    assert board.status("a", kind).verdict is FAIL  # type: ignore[union-attr]
