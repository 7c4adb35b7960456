"""A fleet instance's own knobs: its probes (off, fewer kinds, rarer), its upstream model name, a url without /v1."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from router_core import read_config
from schemas.common import ProbeKind
from schemas.errors import ConfigError
from schemas.fleet import InstanceProbes, InstanceSpec

LOCAL = {"id": "local", "model": "m", "url": "http://127.0.0.1:9001"}


def load(tmp_path: Path, hosted: dict[str, object]) -> InstanceSpec:
    """Write a two-instance routelens.yaml (the second one ``hosted``) and load it as the CLI does."""
    path = tmp_path / "routelens.yaml"
    path.write_text(yaml.safe_dump({"fleet": {"instances": [LOCAL, {
        "id": "hosted", "model": "m", "engine": "external", "url": "https://api.example.com", **hosted}]}},
        sort_keys=False), encoding="utf-8")
    return read_config(path).fleet.instances[1]


def refused(tmp_path: Path, hosted: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, hosted)
    return str(info.value)


def test_probes_false_means_never_probed(tmp_path: Path) -> None:
    spec = load(tmp_path, {"probes": False})
    assert spec.probes is not None and spec.probes.enabled is False
    assert load(tmp_path, {}).probes is None  # default: as the probes section


def test_probes_mapping_takes_kinds_and_interval(tmp_path: Path) -> None:
    spec = load(tmp_path, {"probes": {"kinds": ["syntax"], "interval_s": 600}})
    assert spec.probes == InstanceProbes(kinds=[ProbeKind.SYNTAX], interval_s=600.0)


@pytest.mark.parametrize(("probes", "field", "words"), [
    (True, "fleet.instances[1].probes", "probes: true is the default"),
    ({}, "fleet.instances[1].probes", "give kinds and/or interval_s"),
    ({"kinds": []}, "fleet.instances[1].probes.kinds", "at least 1 item"),
    ({"kinds": ["syntax", "syntax"]}, "fleet.instances[1].probes", "names a kind twice"),
    ({"kinds": ["sintax"]}, "fleet.instances[1].probes.kinds[0]", "'syntax', 'latency' or 'semantic'"),
    ({"interval_s": 0}, "fleet.instances[1].probes.interval_s", "greater than 0"),
    ({"every": 3}, "fleet.instances[1].probes.every", "Extra inputs are not permitted"),
    ({"enabled": False, "kinds": ["syntax"]}, "fleet.instances[1].probes", "not probed takes no kinds"),
])
def test_a_bad_probes_override_is_refused_naming_file_line_and_field(tmp_path: Path, probes: object, field: str,
                                                                     words: str) -> None:
    message = refused(tmp_path, {"probes": probes})
    path = tmp_path / "routelens.yaml"
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "probes" in text)
    assert f"{path}:" in message and f": {field}: " in message and words in message
    assert any(f"{path}:{n}: {field}" in message for n in range(line, line + 4))  # the probes block's lines


def test_override_problems_against_the_probes_section() -> None:
    o = InstanceProbes(kinds=[ProbeKind.SYNTAX, ProbeKind.SEMANTIC], interval_s=10)
    problems = o.problems([ProbeKind.SYNTAX, ProbeKind.LATENCY], 30.0)
    assert len(problems) == 2
    assert "kinds ['semantic'] not in probes.kinds" in problems[0]
    assert "interval_s 10 is shorter than probes.interval_s 30" in problems[1]
    assert InstanceProbes(kinds=[ProbeKind.LATENCY], interval_s=30).problems(list(ProbeKind), 30.0) == []


@pytest.mark.parametrize("url", ["https://api.example.com/v1", "https://api.example.com/v1/",
                                 "https://gw.example.com/openai/v1"])
def test_a_url_ending_in_v1_is_refused_saying_to_drop_it(tmp_path: Path, url: str) -> None:
    message = refused(tmp_path, {"url": url})
    assert "fleet.instances[1].url" in message and "without /v1" in message
    assert "the gateway adds /v1/chat/completions" in message


@pytest.mark.parametrize("url", ["https://api.example.com", "https://api.example.com/", "http://h:8000/v10",
                                 "https://gw.example.com/openai", "http://h/v1x"])
def test_other_urls_still_load(tmp_path: Path, url: str) -> None:
    assert load(tmp_path, {"url": url}).url == url.rstrip("/")


def test_upstream_model_defaults_to_none_and_loads(tmp_path: Path) -> None:
    assert load(tmp_path, {}).upstream_model is None
    assert load(tmp_path, {"upstream_model": "deepseek-ai/DeepSeek-V4"}).upstream_model == "deepseek-ai/DeepSeek-V4"
    assert "fleet.instances[1].upstream_model" in refused(tmp_path, {"upstream_model": ""})


def test_a_dumped_configuration_loads_again(tmp_path: Path) -> None:
    """The drill writes a configuration with model_dump and reloads it: every override survives the trip."""
    cases: list[dict[str, object]] = [{"probes": False}, {"probes": {"kinds": ["latency"]}, "upstream_model": "x"}, {}]
    for hosted in cases:
        spec = load(tmp_path, hosted)
        again = InstanceSpec.model_validate(yaml.safe_load(yaml.safe_dump(spec.model_dump(mode="json"))))
        assert again == spec



@pytest.mark.parametrize(("probes", "says"), [
    ({"interval_s": 5}, "interval_s 5 is shorter than probes.interval_s 30"),
    ({"kinds": ["syntax", "semantic"]}, "['semantic'] not in probes.kinds ['syntax']"),
])
def test_an_override_asking_more_than_the_probes_section_is_refused_at_load(tmp_path: Path, probes: object,
                                                                           says: str) -> None:
    """It was refused only when the prober started (in serve's prober child, without a line)."""
    path = tmp_path / "routelens.yaml"
    path.write_text(yaml.safe_dump({"probes": {"kinds": ["syntax"], "interval_s": 30}, "fleet": {"instances": [
        LOCAL, {"id": "hosted", "model": "m", "engine": "external", "url": "https://api.example.com",
                "probes": probes}]}}, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        read_config(path)
    text = str(info.value)
    assert "routelens.yaml:1:" in text and "fleet.instances[1].probes (hosted)" in text and says in text
