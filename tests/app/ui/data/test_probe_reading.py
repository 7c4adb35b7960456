"""Probe results read against the running configuration: verdicts, value / limit, tables without None."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from app.ui.data import probe_reading as rd
from app.ui.data import probes as data
from app.ui.limits import Limits
from schemas.common import ProbeVerdict
from schemas.config.probes import ProbeSettings, SemanticProbeSettings
from schemas.probe import ProbeResult
from tests.app import stub_trace_api as stub

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LIMITS = Limits(constraints=())
STRICT = Limits(constraints=(), probes=ProbeSettings(semantic=SemanticProbeSettings(threshold=0.9)))


@pytest.fixture
def results() -> list[ProbeResult]:
    return stub.sample_probe_results(NOW)


def test_the_running_threshold_colours_not_the_recorded_verdict(results: list[ProbeResult]) -> None:
    # The healthy instance's 0.86 passed the prober's 0.65; under a running threshold of 0.9 it fails.
    grid = data.last_verdicts(results, limits=STRICT).set_index(["instance", "kind"])
    assert grid.loc[(stub.HEALTHY_INSTANCE, "semantic"), "verdict"] == "failed"
    assert grid.loc[(stub.HEALTHY_INSTANCE, "semantic"), "reading"] == "0.860 / 0.900"
    assert data.instances_worst_first(data.last_verdicts(results, limits=STRICT))[-1] != stub.HEALTHY_INSTANCE
    loose = data.last_verdicts(results, limits=LIMITS).set_index(["instance", "kind"])
    assert loose.loc[(stub.HEALTHY_INSTANCE, "semantic"), "verdict"] == "ok"


def test_judged_rewrites_only_the_verdicts_the_configuration_reads_otherwise(results: list[ProbeResult]) -> None:
    assert rd.judged(results, LIMITS) == results
    strict = rd.judged(results, STRICT)
    changed = [(a.instance, a.kind.value) for a, b in zip(results, strict, strict=True) if a.verdict != b.verdict]
    assert changed and set(changed) == {(stub.HEALTHY_INSTANCE, "semantic"), (stub.DRIFTING_INSTANCE, "semantic")}


def test_verdict_table_has_no_missing_cell_and_no_raw_float(results: list[ProbeResult]) -> None:
    held = data.held_verdicts(stub.sample_router_state(NOW))
    table = rd.verdict_table(data.last_verdicts(results, held, limits=LIMITS))
    assert list(table.columns) == list(rd.VERDICT_TABLE_COLUMNS)
    assert not table.drop(columns="link").isna().any().any()
    row = table.set_index(["instance", "kind"]).loc[(stub.DRIFTING_INSTANCE, "semantic")]
    assert (row["value / limit"], row["router verdict"]) == ("0.310 / 0.650", "failed")
    assert row["router since"] == "2026-12-01 11:59:00"
    unseen = table.set_index(["instance", "kind"]).loc[(stub.SYNTAX_ONLY_INSTANCE, "semantic")]
    assert (unseen["value / limit"], unseen["last result"], unseen["limit"], unseen["router verdict"]) == ("—",) * 4


def test_results_table_newest_first_read_in_units(results: list[ProbeResult]) -> None:
    mine = [r for r in results if r.instance == stub.DRIFTING_INSTANCE]
    table = rd.results_table(mine, LIMITS)
    assert list(table.columns) == list(rd.RESULT_COLUMNS) and len(table) == len(mine)
    assert table["time"].is_monotonic_decreasing
    latest = table[table["kind"] == "latency"].iloc[0]
    assert (latest["verdict"], latest["value / limit"], latest["probe took"]) == (
        "degraded", "1,275 ms / 640–960 ms", "50 ms")
    assert not table.isna().any().any()
    assert rd.results_table([], LIMITS).empty


def test_limits_caption_names_the_settings() -> None:
    assert rd.limits_caption(STRICT) == (
        "Judged against defaults: semantic similarity ≥ 0.900 (probes.semantic.threshold, or a reference's own), "
        "latency p95 and p50 within ±20% of their learned baselines and not creeping up over the last 8 probes "
        "(probes.latency.tolerance, trend_window; the value shown is the p95, the reason names what was off), "
        "syntax: a valid answer.")


def test_a_result_without_a_value_keeps_the_probers_verdict(results: list[ProbeResult]) -> None:
    refused = results[-1].model_copy(update={"value": None, "verdict": ProbeVerdict.FAILED, "reason": "refused"})
    assert rd.verdict_of(refused, STRICT) == "failed"
    assert pd.isna(data.last_verdicts([refused], limits=LIMITS)["value"]).all()
