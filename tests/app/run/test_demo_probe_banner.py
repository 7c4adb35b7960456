"""The demo's banner names the probes its prober runs: the configured kinds, the semantic one off without its model.

Before, it always said "syntax, latency, semantic", also where the prober had said at start that the
semantic probe was off (no torch) or the config asked for fewer kinds.
"""

from __future__ import annotations

import pytest

import probes.embedder
from app.run.demo import probe_kinds
from schemas.config import RouteLensConfig

FLEET = {"fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:9"}]}}


def config(kinds: list[str] | None = None) -> RouteLensConfig:
    return RouteLensConfig.model_validate({**FLEET, **({"probes": {"kinds": kinds}} if kinds else {})})


def test_the_banner_names_the_configured_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes.embedder, "available", lambda: None)
    assert probe_kinds(config()) == "syntax, latency, semantic"
    assert probe_kinds(config(["syntax"])) == "syntax"


def test_without_the_embedding_model_the_banner_says_the_semantic_probe_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes.embedder, "available", lambda: "not installed: torch (pip install 'routelens[probes]')")
    assert probe_kinds(config()) == ("syntax, latency; semantic off: the embedding model is not installed: torch "
                                     "(pip install 'routelens[probes]')")
    assert probe_kinds(config(["syntax", "latency"])) == "syntax, latency"
