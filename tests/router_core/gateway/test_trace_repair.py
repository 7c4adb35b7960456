"""Escaping what is not UTF-8 in a trace: every such string found and escaped, everything else kept as it was."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from router_core.gateway.trace_repair import escape_surrogates
from schemas.common import OutcomeStatus
from schemas.trace import Outcome

BAD = b"\xffx".decode("utf-8", "surrogateescape")


class Pair(NamedTuple):
    left: str
    right: str


@dataclass(frozen=True)
class Note:
    text: str


def test_strings_that_are_not_utf8_are_escaped_wherever_they_are_and_named() -> None:
    outcome = Outcome(status=OutcomeStatus.ERROR, http_status=400, error_class=BAD, total_ms=1.0)  # a frozen model
    value = {"ok": "café", "n": 3, "steps": [{"detail": ["fine", BAD]}], "pair": Pair("a", BAD), "note": Note(BAD),
             "outcome": outcome, "tuple": ("a", BAD)}
    escaped, where = escape_surrogates(value)
    assert where == ["steps[0].detail[1]", "pair[1]", "note.text", "outcome.error_class", "tuple[1]"]
    assert escaped["steps"][0]["detail"] == ["fine", "\\xffx"] and escaped["pair"] == Pair("a", "\\xffx")
    assert escaped["note"] == Note("\\xffx") and escaped["tuple"] == ("a", "\\xffx")
    assert escaped["outcome"].error_class == "\\xffx" and outcome.error_class == BAD  # a copy, the original kept
    assert escaped["ok"] == "café" and escaped["n"] == 3
    assert escape_surrogates(escaped)[1] == []  # nothing left that UTF-8 cannot encode


def test_a_value_without_such_strings_is_returned_as_it_is() -> None:
    value = {"a": ["b", ("c", "ü")], "o": Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=1.0)}
    escaped, where = escape_surrogates(value)
    assert escaped is value and where == []
    assert escape_surrogates("\ud800")[0] == "\\xed\\xa0\\x80"  # one aiohttp does not make: its surrogatepass bytes
