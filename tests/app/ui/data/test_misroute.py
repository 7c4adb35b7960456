"""Marking a misroute: the models offered, the first one offered, and feedback without a gateway."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from app.run.procs import free_port
from app.ui.data.misroute import config_path, default_target, post_feedback, target_options
from schemas.trace import CandidateEval, DecisionTrace
from tests.factories import make_trace

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _trace() -> DecisionTrace:
    base = make_trace()
    coder = CandidateEval(instance="coder-a", model="coder", zone="az1", feasible=True, total=0.2, rank=2)
    return base.model_copy(update={"candidates": [*base.candidates, coder]})


def test_the_chosen_model_comes_first_and_the_best_other_is_offered() -> None:
    trace = _trace()
    options = target_options(trace)
    assert options == ["deepseek-v4-32k", "coder"]
    assert options[default_target(trace, options)] == "coder"
    alone = make_trace()  # every candidate of the chosen model: nothing else to offer first
    assert default_target(alone, target_options(alone)) == 0


def test_feedback_says_why_it_was_not_sent() -> None:
    trace = _trace()
    assert post_feedback(trace, "coder", NOW, None, {"ROUTELENS_DB": "/x.duckdb"}).startswith(
        "feedback not sent: the app reads a trace file")
    down = f"http://127.0.0.1:{free_port()}"
    assert "unreachable" in post_feedback(trace, "coder", NOW, None, {"ROUTELENS_API_URL": down})


def test_the_configuration_is_the_named_file_if_it_exists(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    assert config_path({"ROUTELENS_CONFIG": str(cfg)}) is None
    cfg.write_text("{}")
    assert config_path({"ROUTELENS_CONFIG": str(cfg)}) == cfg
