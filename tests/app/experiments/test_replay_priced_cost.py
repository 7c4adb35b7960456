"""A range replay prices each flip at the trace's own time: ``cost.base``, times the surge in peak hours.

Traces decided at 10:00 Shanghai (a peak hour of ``routing.peak_hours``) over a fleet priced as seed
000's table, replayed with one model banned: the predicted cost delta is the peak prices' (the
flips' new instances at their surge), not the base prices', and not the replay's wall-clock hour.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from app.experiments.replay_range import COST_BASIS, replay_range
from app.experiments.replayer import Replayer
from bench.replay_traces import CONSTRAINTS, MODELS, fleet_config
from router_core import build_policy, builtin_registry
from schemas.config import RouteLensConfig
from schemas.queries import TraceFilter
from schemas.replay_report import NONE_TARGET
from tests.app.experiments.seed import decided, store_traces

PRICES = {"deepseek-v4-32k": (1.8, 2.1), "deepseek-coder-6b-fp16": (1.0, 1.2), "qwen-72b": (2.5, 1.0)}
BAN = {"name": "ban-qwen", "metric": "queue", "op": "<=", "threshold": -1, "models": ["qwen-72b"]}
PEAK = datetime(2026, 11, 2, 10, 0, tzinfo=ZoneInfo("Asia/Shanghai")).astimezone(UTC)  # 02:00 UTC
EVENING = datetime(2026, 11, 2, 20, 0, tzinfo=ZoneInfo("Asia/Shanghai")).astimezone(UTC)  # 12:00 UTC


def priced_config(**sections: Any) -> RouteLensConfig:
    """The bench fleet with the seed's peak premiums, routing in Shanghai."""
    base = fleet_config(**sections)
    fleet = base.fleet.model_dump(mode="json")
    for inst in fleet["instances"]:
        inst["cost"] = dict(zip(("base", "surge_multiplier"), PRICES[inst["model"]], strict=True))
    return base.model_copy(update={"fleet": type(base.fleet).model_validate(fleet),
                                   "routing": type(base.routing).model_validate({"timezone": "Asia/Shanghai"})})


def model_of(instance: str) -> str:
    return MODELS[int(instance.rsplit("-", 1)[1]) % len(MODELS)]


def expected_delta(matrix: dict[str, Counter[str]] | dict[str, dict[str, int]], peak: bool) -> float:
    total = 0.0
    for old, row in matrix.items():
        for new, n in row.items():
            if new == old or NONE_TARGET in (old, new):
                continue
            (ob, os), (nb, ns) = PRICES[model_of(old)], PRICES[model_of(new)]
            total += n * ((nb * ns - ob * os) if peak else (nb - ob))
    return total


@pytest.mark.parametrize(("start", "peak"), [(PEAK, True), (EVENING, False)], ids=["peak", "evening"])
def test_the_replay_cost_delta_uses_the_price_at_each_trace_time(tmp_path: Path, start: datetime, peak: bool) -> None:
    traces = decided(300, priced_config(), start=start, explicit_share=0.0)
    db = store_traces(tmp_path / "traces.duckdb", traces)
    banned = priced_config(constraints=[*CONSTRAINTS, BAN])
    report = replay_range(db, start, start + timedelta(hours=1), TraceFilter(), banned)
    assert report.replayed == 300 and report.flips > 10
    assert report.cost.delta_total == pytest.approx(expected_delta(report.instance_matrix, peak))
    assert report.cost.basis == COST_BASIS and "surge_multiplier" in report.cost.basis


def test_the_same_policy_flips_nothing_at_peak(tmp_path: Path) -> None:
    config = priced_config()
    db = store_traces(tmp_path / "traces.duckdb", decided(200, config, start=PEAK))
    report = replay_range(db, PEAK, PEAK + timedelta(hours=1), TraceFilter(), config)
    assert report.replayed == 200 and report.flips == 0


def test_cost_of_prices_an_instance_at_the_given_time() -> None:
    replayer = Replayer(build_policy(priced_config(), builtin_registry()))
    assert replayer.cost_of("inst-0", PEAK) == pytest.approx(1.8 * 2.1)  # inst-0: deepseek-v4-32k
    assert replayer.cost_of("inst-0", EVENING) == pytest.approx(1.8)
    assert replayer.cost_of("inst-1", PEAK) == pytest.approx(1.0 * 1.2)
    assert replayer.cost_of("nowhere", PEAK) is None and replayer.cost_of(None, PEAK) is None
