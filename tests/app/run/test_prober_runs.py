"""The in-process prober hands every result's count to the breakers' recovery, not only verdict changes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import CollectorRegistry

from app.run.prober import Prober
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config import RouteLensConfig
from schemas.probe import ProbeResult


def test_every_result_reaches_runs_and_the_feed_publishes_the_counts(tmp_path: Path) -> None:
    config = RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:9"}]},
        "probes": {"enabled": True, "kinds": ["syntax"]}})
    counts: list[tuple[str, str, int, int]] = []
    changes: list[str] = []
    prober = Prober(config, db_path=str(tmp_path / "t.duckdb"), emit=lambda _: None,
                    apply=lambda s, i: changes.append(s.verdict.value), registry=CollectorRegistry(),
                    runs=lambda i, k, n, ok: counts.append((i, k, n, ok)))
    for n, verdict in enumerate([ProbeVerdict.OK, ProbeVerdict.OK, ProbeVerdict.FAILED, ProbeVerdict.OK]):
        prober._on_result(ProbeResult(probe_id=f"p{n}", ts=datetime(2026, 1, 1, 0, 0, n, tzinfo=UTC), instance="a",
                                      model="m", kind=ProbeKind.SYNTAX, verdict=verdict, latency_ms=3.0))
    assert counts == [("a", "syntax", 1, 1), ("a", "syntax", 2, 2), ("a", "syntax", 3, 0), ("a", "syntax", 4, 1)]
    assert changes == ["ok"] * 4  # every reading reaches the router: one failure of three does not fail it
    assert prober.feed()["runs"] == {"a": {"syntax": [4, 1]}}


def test_a_probe_that_timed_out_has_no_similarity(tmp_path: Path) -> None:
    """A hung instance's semantic probe set routelens_probe_similarity to its elapsed milliseconds (10,001)."""
    config = RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:9"}]},
        "probes": {"enabled": True, "kinds": ["semantic"]}})
    registry = CollectorRegistry()
    prober = Prober(config, db_path=str(tmp_path / "t.duckdb"), emit=lambda _: None, apply=None, registry=registry,
                    embedder=object())  # type: ignore[arg-type]
    result = prober._timed_out(ProbeKind.SEMANTIC, prober.targets[0], 10_001.1)
    assert result.value is None and result.threshold is None and result.latency_ms == 10_001.1
    prober._on_result(result)
    assert registry.get_sample_value("routelens_probe_similarity", {"instance": "a", "model": "m"}) is None
    labels = {"instance": "a", "model": "m", "kind": "semantic"}
    assert registry.get_sample_value("routelens_probe_success", labels) == 0
