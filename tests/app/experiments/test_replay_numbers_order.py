"""``routelens replay``'s tables in a stable order, and no flip cause dropped from the summary unsaid.

Found checking the report against the trace file (session 19): the not-replayable reasons (and each
matrix row's cells, in ``--json``) came in the order their first trace came, so the same window
printed them differently from a store's pages, a file, or two processes; the summary showed the
first 8 flip causes and said nothing of the others, so its causes did not add up to its flips.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from app.cli.replay import _summary
from app.experiments.replay_range import report_of
from app.experiments.tally import Tally
from bench.replay_traces import T0
from schemas.queries import TraceFilter


def _tally() -> Tally:
    tally = Tally()
    tally.skip("policy lacks the rule")  # met first, the least often
    for _ in range(3):
        tally.skip("detail sampled out")
    for _ in range(3):
        tally.skip("another reason")
    tally.replayed = tally.n = tally.n + 12
    tally.matrix = {"small": Counter({"big": 1, "tiny": 5, "small": 5})}
    tally.instances = {"small-1": Counter({"big-1": 1, "small-2": 11})}
    tally.flips = 12
    tally.causes = Counter({("term", f"t{k:02}"): 1 for k in range(10)})
    tally.causes[("fleet", "small-1 not in the new fleet")] = 2
    return tally


def test_reasons_and_cells_come_most_first_then_by_name() -> None:
    report = report_of(_tally(), since=T0, until=T0 + timedelta(hours=1), flt=TraceFilter(), policy_name="p",
                       policy_hash="sha256:0")
    assert list(report.not_replayable_reasons.items()) == [("another reason", 3), ("detail sampled out", 3),
                                                           ("policy lacks the rule", 1)]
    assert list(report.matrix["small"].items()) == [("small", 5), ("tiny", 5), ("big", 1)]
    assert list(report.instance_matrix["small-1"]) == ["small-2", "big-1"]


def test_the_summary_counts_the_causes_it_does_not_show(capsys: pytest.CaptureFixture[str]) -> None:
    report = report_of(_tally(), since=T0, until=T0 + timedelta(hours=1), flt=TraceFilter(), policy_name="p",
                       policy_hash="sha256:0")
    _summary(report)
    err = capsys.readouterr().err
    shown = [line for line in err.splitlines() if line.strip().startswith("cause ")]
    assert len(shown) == 8 and "fleet: small-1 not in the new fleet (2)" in shown[0]
    assert "… 3 more causes (3 flips; --json lists every one)" in err  # 2 + 7 shown, 3 of the 12 flips not
    assert "small -> small 5, tiny 5, big 1" in err
