"""Degraded steps a configuration can never reach are refused (seed 000's steps run when nothing is feasible)."""

from __future__ import annotations

from pathlib import Path

import pytest

from router_core.config_file import read_config
from schemas.errors import ConfigError

FLEET = 'fleet:\n  instances:\n    - {id: a, model: m, url: "http://127.0.0.1:9"}\n'
STEPS = "economics:\n  degraded:\n    steps: [shed_features, cap_max_tokens, reject]\n"


def test_steps_that_failing_open_never_reaches_are_one_error_naming_both_fields(tmp_path: Path) -> None:
    path = tmp_path / "routelens.yaml"
    path.write_text(FLEET + STEPS)
    with pytest.raises(ConfigError) as caught:
        read_config(path)
    text = str(caught.value)
    assert str(path) in text and "economics.degraded.steps" in text and "router.on_empty: reject" in text


@pytest.mark.parametrize("extra", ["router: {on_empty: reject}\n" + STEPS, "", "router: {on_empty: fail_open}\n"])
def test_reachable_steps_and_the_defaults_load(tmp_path: Path, extra: str) -> None:
    path = tmp_path / "routelens.yaml"
    path.write_text(FLEET + extra)
    assert read_config(path).fleet.instances[0].id == "a"
