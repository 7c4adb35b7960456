"""merge_workers: every worker's families in one valid exposition, each sample labelled ``worker``."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest

from router_core.metrics import GatewayMetrics, StageTimes
from router_core.metrics.worker_merge import WORKER_UP, merge_workers
from tests.promtext import samples


def worker_text(requests: int, *, observe: bool = True) -> str:
    """One worker's own exposition: the gateway's real families, a histogram and a gauge of its own."""
    reg = CollectorRegistry()
    metrics = GatewayMetrics(reg)
    for _ in range(requests):
        metrics.record_request("m", "a", 200)
    metrics.record_request("m", "b", 503)
    latency = Histogram("routelens_test_latency_seconds", "A histogram.", ["stage"], buckets=(0.1, 1.0), registry=reg)
    if observe:  # a family may have samples in one worker and none yet in another
        latency.labels("forward").observe(0.5)
    Gauge("routelens_test_pending", "An unlabelled gauge.", registry=reg).set(requests)
    StageTimes(reg).add("decide", 0.0, 0.25)
    return generate_latest(reg).decode()


def test_two_workers_families_merged_once_each_labelled_and_a_missing_one_said() -> None:
    texts: dict[int, str | None] = {0: worker_text(3), 1: worker_text(5, observe=False), 2: None}
    merged = merge_workers(texts).decode()

    # one HELP and one TYPE per family (concatenating the texts repeats them: invalid)
    for kind in ("HELP", "TYPE"):
        repeated = [n for n, c in Counter(re.findall(rf"^# {kind} (\S+)", merged, re.M)).items() if c > 1]
        assert repeated == [], kind
    m = samples(merged)  # prometheus_client's parser; a series twice is an error
    # exactly each worker's samples, with its worker label, and nothing else but the up gauge
    want = {(name, labels | {("worker", str(w))}): v for w, text in texts.items() if text is not None
            for (name, labels), v in samples(text).items()}
    assert {k: v for k, v in m.items() if k[0] != WORKER_UP} == want
    assert m.value("routelens_gateway_requests_total", model="m", instance="a", code="200", worker="0") == 3
    assert m.value("routelens_gateway_requests_total", model="m", instance="a", code="200", worker="1") == 5
    assert m.value("routelens_test_pending", worker="1") == 5
    assert m.value("routelens_test_latency_seconds_count", stage="forward", worker="0") == 1
    assert m.value("routelens_gateway_stage_cpu_seconds_sum", stage="decide", worker="1") == 0.25
    # worker 2 did not answer: left out, and said
    assert [k for k in m if ("worker", "2") in k[1] and k[0] != WORKER_UP] == []
    assert {w: m.value(WORKER_UP, worker=w) for w in "012"} == {"0": 1.0, "1": 1.0, "2": 0.0}
    # the families stay whole: every sample of a family follows its own TYPE line
    family = None
    for line in merged.splitlines():
        if line.startswith("# TYPE "):
            family = line.split()[2]
        elif not line.startswith("#"):
            assert family is not None and line.startswith(family.removesuffix("_total")), line


def test_a_worker_alone_and_no_worker_at_all() -> None:
    m = samples(merge_workers({1: worker_text(2)}).decode())
    assert m.value("routelens_test_pending", worker="1") == 2 and m.value(WORKER_UP, worker="1") == 1
    assert samples(merge_workers({0: None, 1: None}).decode()) == {(WORKER_UP, frozenset({("worker", "0")})): 0.0,
                                                                  (WORKER_UP, frozenset({("worker", "1")})): 0.0}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool missing: apt-get install -y prometheus")
def test_promtool_checks_the_merged_exposition() -> None:
    merged = merge_workers({0: worker_text(3), 1: worker_text(5, observe=False), 2: None})
    out = subprocess.run(["promtool", "check", "metrics"], input=merged, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
