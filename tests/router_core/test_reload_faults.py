"""Configuration and policy files that go wrong while running, or are not UTF-8: said; watching goes on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from router_core.config_file import read_config
from router_core.experiments.reload import ConfigWatcher
from router_core.gateway.policy_gate import PolicyGate
from router_core.rules.load import load_policy
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError

FLEET = 'fleet:\n  instances:\n    - {id: a, model: m, url: "http://127.0.0.1:9"}\n'


def test_a_byte_that_is_not_utf8_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "routelens.yaml"
    path.write_bytes(FLEET.encode() + b"router:\n  version: caf\xe9\n")  # a Latin-1 editor's e-acute
    with pytest.raises(ConfigError) as caught:
        read_config(path)
    text = str(caught.value)
    assert f"{path}:5" in text and "not UTF-8: byte 0xe9 at column 15" in text


def bump(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a new stamp even within one tick


def test_the_watcher_says_why_a_reload_failed_and_takes_the_next_good_one(tmp_path: Path) -> None:
    path = tmp_path / "routelens.yaml"
    path.write_text(FLEET)
    applied: list[RouteLensConfig] = []
    watcher = ConfigWatcher(path, applied.append)
    bump(path, FLEET.encode() + b"# caf\xe9\n")
    assert not watcher.check() and watcher.last_error is not None and "not UTF-8" in watcher.last_error

    def refuse(_: RouteLensConfig) -> None:
        raise RuntimeError("boom")

    broken = ConfigWatcher(path, refuse)
    bump(path, FLEET.encode() + b"# one\n")
    assert not broken.check() and broken.last_error is not None and "RuntimeError: boom" in broken.last_error
    bump(path, FLEET.encode() + b"# two\n")
    assert watcher.check() and len(applied) == 1 and watcher.last_error is None


def test_a_policy_file_deleted_while_running_is_said_and_its_return_reloads(tmp_path: Path) -> None:
    config = RouteLensConfig.model_validate({"fleet": {"instances": [{"id": "a", "model": "m",
                                                                       "url": "http://127.0.0.1:9"}]}})
    policy = tmp_path / "policy.yaml"
    text = "routing_matrix:\n  - {rule_name: long, condition: 'input_length > 8000', primary_target: m}\n"
    policy.write_text(text)
    gate = PolicyGate(config, load_policy(policy, config), path=policy)
    policy.unlink()
    assert not gate.check()
    assert gate.last_error is not None and "gone" in gate.last_error and gate.rules is not None  # the last good stays
    policy.write_text(text)
    assert gate.check() and gate.last_error is None
