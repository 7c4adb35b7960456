"""``policies/seed003.yaml`` names models the shipped fleet does not serve; the config beside it serves them.

The commands its header and docs/policies.md give work as typed, from the repository's root.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def routelens(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_the_seed003_policy_checks_and_passes_its_cases_against_the_config_beside_it() -> None:
    config = "policies/seed003.routelens.yaml"
    check = routelens("--config", config, "policy", "check", "policies/seed003.yaml")
    assert check.returncode == 0 and "ok, 2 rules, 4 test cases" in check.stdout, check.stdout + check.stderr
    test = routelens("--config", config, "policy", "test", "policies/seed003.yaml")
    assert test.returncode == 0 and "4 of 4 cases pass" in test.stdout, test.stdout + test.stderr
    assert "--config policies/seed003.routelens.yaml policy test policies/seed003.yaml" in \
        (ROOT / "policies" / "seed003.yaml").read_text(encoding="utf-8")


def test_against_the_shipped_routelens_yaml_it_names_what_is_not_served() -> None:
    res = routelens("policy", "check", "policies/seed003.yaml")
    assert res.returncode == 2 and "qwen-vl" in res.stdout + res.stderr
