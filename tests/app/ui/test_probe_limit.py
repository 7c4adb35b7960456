"""A probe's bound comes from the running config: semantic threshold (or a reference's own), latency band, syntax."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.ui.limits import CONFIG_ENV, Limits, load_limits
from app.ui.probe_limit import build_probe_limit, reference_thresholds
from schemas.config.probes import ProbeSettings, SemanticProbeSettings

SETTINGS = ProbeSettings(semantic=SemanticProbeSettings(threshold=0.7))


def test_semantic_below_the_configured_threshold_fails_whatever_was_recorded() -> None:
    lim = build_probe_limit("semantic", SETTINGS, {})
    assert lim is not None and lim.source == "probes.semantic.threshold"
    assert lim.text(0.68) == "0.680 / 0.700"
    assert lim.verdict(0.68, "ok") == "failed"  # recorded under a looser threshold: the running one decides
    assert lim.verdict(0.72, "failed") == "ok"
    assert lim.verdict(None, "failed") == "failed"  # no answer to judge (the request failed): the prober's word
    assert lim.text(None) == "— / 0.700"


def test_a_reference_with_its_own_threshold_is_judged_by_it() -> None:
    lim = build_probe_limit("semantic", SETTINGS, {"backup-zh": 0.73}, reference="backup-zh")
    assert lim is not None and lim.low == 0.73 and lim.source == "reference backup-zh's own threshold"
    assert lim.verdict(0.71, "ok") == "failed"
    other = build_probe_limit("semantic", SETTINGS, {"backup-zh": 0.73}, reference="other")
    assert other is not None and other.verdict(0.71, "ok") == "ok"


def test_latency_band_around_the_baseline_and_what_it_cannot_clear() -> None:
    lim = build_probe_limit("latency", SETTINGS, {}, baseline=800.0)
    assert lim is not None and (lim.low, lim.high) == pytest.approx((640, 960))
    assert lim.text(1275.0) == "1,275 ms / 640–960 ms"
    assert lim.source == "probes.latency.tolerance ±20% of baseline 800 ms"
    assert lim.verdict(1275.0, "ok") == "degraded" and lim.verdict(500.0, "ok") == "degraded"
    assert lim.verdict(900.0, "degraded") == "degraded"  # a trend or the p50: the p95 inside the band does not clear it
    assert lim.verdict(900.0, "ok") == "ok"
    learning = build_probe_limit("latency", SETTINGS, {}, baseline=None)
    assert learning is not None and learning.text(812.4) == "812 ms" and learning.verdict(812.4, "ok") == "ok"


def test_syntax_reads_valid_or_invalid() -> None:
    lim = build_probe_limit("syntax", SETTINGS, {})
    assert lim is not None
    assert (lim.text(1.0), lim.text(0.0), lim.text(None)) == ("valid", "invalid", "—")
    assert (lim.verdict(1.0, "ok"), lim.verdict(0.0, "ok")) == ("ok", "failed")
    assert build_probe_limit("nonsense", SETTINGS, {}) is None


def test_reference_thresholds_from_the_file_and_the_packaged_one(tmp_path: Path) -> None:
    refs = tmp_path / "refs.yaml"
    refs.write_text("- {id: a, lang: en, prompt: p, answer: x, threshold: 0.8}\n- {id: b, lang: en, prompt: p, "
                    "answer: y}\n", encoding="utf-8")
    assert reference_thresholds(str(refs)) == {"a": 0.8}
    assert reference_thresholds(None)["backup-zh"] == pytest.approx(0.73)  # the packaged file's calibrated one
    assert reference_thresholds(str(tmp_path / "missing.yaml")) == {}


def test_limits_read_the_probe_section_of_the_running_config(tmp_path: Path) -> None:
    refs = tmp_path / "refs.yaml"
    refs.write_text("- {id: a, lang: en, prompt: p, answer: x, threshold: 0.8}\n", encoding="utf-8")
    config = tmp_path / "routelens.yaml"
    config.write_text("fleet:\n  instances:\n    - {id: a-0, model: big, url: 'http://127.0.0.1:9'}\n"
                      "probes:\n  semantic: {threshold: 0.55, references: refs.yaml}\n  latency: {tolerance: 0.5}\n",
                      encoding="utf-8")
    lim = load_limits({CONFIG_ENV: str(config)})
    assert lim.problem is None
    semantic, own = lim.probe("semantic"), lim.probe("semantic", reference="a")
    assert semantic is not None and semantic.low == 0.55
    assert own is not None and own.low == 0.8
    latency = lim.probe("latency", baseline=100.0)
    assert latency is not None and (latency.low, latency.high) == pytest.approx((50, 150))
    defaults = Limits(constraints=()).probe("semantic")
    assert defaults is not None and defaults.low == 0.65
