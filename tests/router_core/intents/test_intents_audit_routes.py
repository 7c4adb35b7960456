"""The routes file from the intents audit: bytes not UTF-8, utterances under two routes, routes of one example."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from router_core.intents.classifier import IntentClassifier
from router_core.intents.routes import MIN_EXAMPLES, append_examples, load_routes
from schemas.config.intents import IntentSettings
from schemas.errors import ConfigError
from tests.router_core.intents._fakes import FakeEmbedder

OK = "a:\n  - reset my password\n  - reset it now\nb:\n  - what is the weather\n  - rain tomorrow\n"


def _problem(exc: pytest.ExceptionInfo[ConfigError]) -> tuple[int | None, str, str]:
    assert len(exc.value.problems) == 1, exc.value.problems
    return exc.value.problems[0]


def test_a_byte_not_utf8_is_a_config_error_naming_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_bytes(b"a:\n  - reset my password\n  - \"x \xff\xfe y\"\nb:\n  - w\n  - v\n")
    with pytest.raises(ConfigError) as exc:
        load_routes(p)
    assert exc.value.source == str(p)
    assert _problem(exc) == (3, "routes", "not UTF-8: byte 0xff at column 8")


def test_from_settings_refuses_it_the_same_way(tmp_path: Path) -> None:
    """The gateway's and `intents eval`'s way in: a ConfigError (the config error path), not a UnicodeDecodeError."""
    p = tmp_path / "r.yaml"
    p.write_bytes(b"\xfe" + OK.encode())
    with pytest.raises(ConfigError, match=r"r\.yaml:1: routes: not UTF-8: byte 0xfe at column 1"):
        IntentClassifier.from_settings(IntentSettings(routes="r.yaml"), tmp_path, embedder=FakeEmbedder())


def test_append_to_a_file_not_utf8_names_it_and_leaves_it_untouched(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    raw = OK.encode().replace(b"rain", b"r\xe9in")
    p.write_bytes(raw)
    with pytest.raises(ConfigError) as exc:
        append_examples(p, "a", ["hello"])
    assert exc.value.source == str(p) and _problem(exc) == (6, "routes", "not UTF-8: byte 0xe9 at column 6")
    assert p.read_bytes() == raw


def test_an_utterance_under_two_routes_is_a_warning_naming_both_lines(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("a:\n  - Reset my password\n  - second one\nb:\n  - reset  my   PASSWORD\n  - another b\n")
    with caplog.at_level(logging.WARNING, logger="router_core.intents.routes"):
        routes = load_routes(p)
    assert routes == {"a": ["Reset my password", "second one"], "b": ["reset  my   PASSWORD", "another b"]}
    assert [r.getMessage() for r in caplog.records] == [
        f"{p}:5: b: the same utterance as line 2 of route 'a': an utterance under two routes contradicts itself "
        "(keep it under one)"]
    assert "password" not in caplog.records[0].getMessage().lower()  # lines, never the utterance, in a log


def test_twice_under_one_route_is_not_a_contradiction(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("a:\n  - one\n  - one\nb:\n  - two\n  - three\n")
    with caplog.at_level(logging.WARNING, logger="router_core.intents.routes"):
        load_routes(p)
    assert not caplog.records


def test_append_refuses_an_utterance_another_route_has(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(OK)
    with pytest.raises(ConfigError, match=r"'Rain  tomorrow' is already an example of route 'b'"):
        append_examples(p, "a", ["fine", "Rain  tomorrow"])
    assert p.read_text() == OK  # nothing written, not even "fine"


@pytest.mark.parametrize(("text", "where"), [("a:\n  - one\nb:\n  - two\n  - three\n", (1, "a")),
                                             ("a:\n  - one\n  - uno\nb:\n  - two\n", (4, "b"))])
def test_a_route_of_one_example_is_refused_naming_route_line_and_minimum(tmp_path: Path, text: str,
                                                                         where: tuple[int, str]) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_routes(p)
    line, route, message = _problem(exc)
    assert (line, route) == where
    assert message.startswith(f"1 example: a route needs at least {MIN_EXAMPLES}") and MIN_EXAMPLES == 2


def test_the_classifier_refuses_it_from_a_mapping_too() -> None:
    with pytest.raises(ConfigError, match=r"<r>:\?: b: 1 example: a route needs at least 2"):
        IntentClassifier({"a": ["one", "uno"], "b": ["two"]}, IntentSettings(routes="<r>"), embedder=FakeEmbedder())


def test_append_builds_a_route_up_one_utterance_at_a_time(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(OK)
    assert append_examples(p, "c", ["hello"])["c"] == ["hello"]  # written: a route is built up
    with pytest.raises(ConfigError, match="1 example"):
        load_routes(p)  # and refused until it has two
    assert append_examples(p, "c", ["hi there"])["c"] == ["hello", "hi there"]
    assert load_routes(p)["c"] == ["hello", "hi there"]


def test_append_warns_of_a_contradiction_already_there_with_the_lines_as_written(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("# c\na:\n\n  - same\n  - one\nb:\n  - same\n  - two\n")
    with caplog.at_level(logging.WARNING, logger="router_core.intents.routes"):
        append_examples(p, "a", ["three"])
    assert p.read_text().splitlines()[2:7] == ['  - "same"', '  - "one"', '  - "three"', '"b":', '  - "same"']
    assert [r.getMessage() for r in caplog.records] == [
        f"{p}:7: b: the same utterance as line 3 of route 'a': an utterance under two routes contradicts itself "
        "(keep it under one)"]
