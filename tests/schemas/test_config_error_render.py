"""How a ConfigError renders: a problem of the file itself reads ``FILE: message``, not ``FILE:?: <file>: ...``."""

from __future__ import annotations

from schemas.errors import ConfigError


def test_a_problem_of_the_whole_file_names_the_file_and_says_it() -> None:
    exc = ConfigError("routelens.yaml", [(None, "<file>", "cannot read: No such file or directory")])
    assert str(exc) == "invalid configuration\nroutelens.yaml: cannot read: No such file or directory"


def test_one_at_a_line_keeps_the_line_but_not_the_placeholder_field() -> None:
    exc = ConfigError("c.yaml", [(3, "<file>", "not UTF-8: byte 0xe9 at column 4")])
    assert str(exc) == "invalid configuration\nc.yaml:3: not UTF-8: byte 0xe9 at column 4"


def test_a_fields_problem_is_rendered_as_before() -> None:
    exc = ConfigError("c.yaml", [(2, "fleet", "Field required"), (None, "routes", "at least two routes")])
    assert str(exc).splitlines()[1:] == ["c.yaml:2: fleet: Field required", "c.yaml:?: routes: at least two routes"]


def test_the_heading_says_what_the_file_is() -> None:
    assert str(ConfigError("r.yaml", [(1, "a", "x")], what="routes file")).startswith("invalid routes file\n")
    assert ConfigError("r.yaml", []).what == "configuration"
