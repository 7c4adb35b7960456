from pathlib import Path

import pytest

from router_core.intents.routes import append_examples, load_routes, route_hash
from schemas.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]


def test_shipped_routes_load() -> None:
    routes = load_routes(ROOT / "data/intents/routelens_routes.yaml")
    assert list(routes) == ["contract", "ticket", "code", "math", "chat"]
    assert all(len(v) == 24 for v in routes.values())  # 12 Chinese, 12 English


@pytest.mark.parametrize(("text", "line", "needle"), [
    ("a:\n  - x\n  - y\nb: 3\n", 4, "list of utterances"),
    ("a:\n  - x\n  - [1]\n", 3, "must be a string"),
    ("a:\n  - x\n  - z\na:\n  - y\n", 4, "duplicate"),
    ("a: [\n", 2, "YAML syntax error at column 1: expected the node content"),
    ("- x\n", 1, "must map"),
    ("a:\n  - x\nb:\n  - y\n  - z\n", 1, "a route needs at least 2"),
], ids=["not-list", "not-string", "duplicate", "bad-yaml", "not-mapping", "one-example"])
def test_errors_name_file_and_line(tmp_path: Path, text: str, line: int, needle: str) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_routes(p)
    assert exc.value.source == str(p)
    got_line, _, message = exc.value.problems[0]
    assert got_line == line and needle in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_routes(tmp_path / "nope.yaml")


def test_append_creates_route_keeps_header_and_others(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("# header\na:\n  - one\n  - eins\nb:\n  - two\n  - zwei\n")
    routes = append_examples(p, "c", ["three", "", "three: with colon"])
    assert routes["c"] == ["three", "three: with colon"]
    assert p.read_text().startswith("# header\n")
    again = load_routes(p)
    assert again == {"a": ["one", "eins"], "b": ["two", "zwei"], "c": ["three", "three: with colon"]}
    append_examples(p, "a", ["one", "uno"])
    assert load_routes(p)["a"] == ["one", "eins", "uno"]
    assert route_hash(["x"]) != route_hash(["x", "y"])
