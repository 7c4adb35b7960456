"""``routelens app`` hands the configuration's app settings (the fleet grid's thresholds) to Streamlit."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.ui.data.fleet import SETTINGS_ENV, thresholds_from_env
from schemas.config import HealthBand

CONFIG = """\
fleet:
  instances:
    - {id: a-1, model: m, url: "http://127.0.0.1:9"}
app:
  health:
    queue: {yellow: 3, red: 7}
    stale_after_s: 12
"""


class Execed(Exception):
    pass


def test_app_settings_reach_the_streamlit_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "routelens.yaml").write_text(CONFIG, encoding="utf-8")
    seen: dict[str, Any] = {}

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        seen.update(env=env, argv=argv)
        raise Execed

    monkeypatch.setattr(os, "execve", execve)
    with pytest.raises(Execed):
        main(["app", "--config", str(tmp_path / "routelens.yaml"), "--api", "http://127.0.0.1:9"])
    th, problem = thresholds_from_env(seen["env"])
    assert problem is None and th.queue == HealthBand(yellow=3, red=7) and th.stale_after_s == 12
    assert th.kv_cache_usage == HealthBand(yellow=0.90, red=0.95)  # the documented default stays


def test_no_config_file_no_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.delenv(SETTINGS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # no routelens.yaml where it is looked for by default (a --config named must exist)
    monkeypatch.setattr(os, "execve", lambda p, a, env: seen.update(env=env) or (_ for _ in ()).throw(Execed))
    with pytest.raises(Execed):
        main(["app", "--api", "http://127.0.0.1:9"])
    assert SETTINGS_ENV not in seen["env"]
