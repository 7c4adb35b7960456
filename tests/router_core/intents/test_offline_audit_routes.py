"""The routes file from the offline-CLI audit: a YAML syntax error in one line, a routes file's own heading,
and the line of an utterance another route has."""

from __future__ import annotations

from pathlib import Path

import pytest

from router_core.intents.routes import append_examples, load_routes
from schemas.errors import ConfigError

OK = "a:\n  - reset my password\n  - reset it now\nb:\n  - what is the weather\n  - rain tomorrow\n"


def _refused(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as exc:
        load_routes(path)
    return exc.value


@pytest.mark.parametrize(("text", "line", "message"), [
    ("a:\n  - x\n - y\n", 3, "YAML syntax error at column 2: expected <block end>, but found '<block sequence start>'"),
    ("a: [x, y\n", 2, "YAML syntax error at column 1: expected ',' or ']', but got '<stream end>'"),
    ("a:\n  - x\x07\n", 2, "YAML syntax error at column 6: unacceptable character #x0007: special characters are "
                           "not allowed"),
], ids=["block", "flow", "control-character"])
def test_a_yaml_syntax_error_is_one_line_with_line_and_column(tmp_path: Path, text: str, line: int,
                                                              message: str) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(text)
    exc = _refused(p)
    assert exc.problems == [(line, "routes", message)]
    assert str(exc) == f"invalid routes file\n{p}:{line}: routes: {message}"  # not PyYAML's dump: no "in <unicode"


def test_every_routes_problem_is_headed_as_the_routes_files(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("a:\n  - x\nb: 3\n")
    assert str(_refused(p)).startswith("invalid routes file\n")
    assert str(_refused(tmp_path / "nope.yaml")) == (f"invalid routes file\n{tmp_path / 'nope.yaml'}: cannot read: "
                                                    "No such file or directory")


def test_an_utterance_another_route_has_is_refused_at_its_line(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(OK)
    with pytest.raises(ConfigError) as exc:
        append_examples(p, "a", ["fine", "Rain  tomorrow"])
    line, route, message = exc.value.problems[0]
    assert (line, route) == (6, "b") and message.startswith("'Rain  tomorrow' is already an example of route 'b'")
    assert f"{p}:6: b: " in str(exc.value) and ":?:" not in str(exc.value)
    assert p.read_text() == OK


@pytest.mark.parametrize("routes", [{"a": ["one", "two"]}, {"a": ["one", "two"], "b": ["only one"]}],
                         ids=["one-route", "one-example"])
def test_the_classifiers_own_checks_are_headed_as_the_routes_files(routes: dict[str, list[str]]) -> None:
    from router_core.intents import IntentClassifier
    from schemas.config.intents import IntentSettings

    with pytest.raises(ConfigError) as exc:
        IntentClassifier(routes, IntentSettings(routes="r.yaml", escalate=False))
    assert str(exc.value).startswith("invalid routes file\nr.yaml")
