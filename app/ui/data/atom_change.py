"""A rule's failing atom, read back from its trace line, and the smallest change of the request that turns it.

The router writes each atom that failed a rule as the fact that held instead
(``router_core.rules.condition.why_not``): ``request_time.hour = 17 not in [9, 11, 14, 16]``,
``input_length = 500 <= 8000``, ``intent = null != "legal"``, ``prompt_contains('x') did not
match``. :func:`atom_change` parses such a line back and says what value would have turned it:
``had request_time.hour been 16``. Pure; no router import (the app reads traces only).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["AtomChange", "atom_change"]

_FACT = re.compile(r"^(?P<label>[^\s=]+) = (?P<rest>.*)$", re.S)
_MEMBER = re.compile(r"^ (?P<rel>not in|in) (?P<items>\[.*\])$", re.S)
_COMPARE = re.compile(r"^ (?P<rel>!=|==|<=|>=|<|>) (?P<rhs>.+)$", re.S)
_UNORDERED = re.compile(r"^ \(not (?P<op><=|>=|<|>) (?P<rhs>.+)\)$", re.S)
_PATTERN = re.compile(r"^(?P<atom>.+) (?P<verdict>did not match|matched)$", re.S)
_GENERIC = re.compile(r"^(?P<atom>.+) is (?P<verdict>true|false)(?: \(.*\))?$", re.S)
# The relation a fact states -> the atom's own operator (the fact is its negation).
_ATOM_OP = {"<=": ">", "<": ">=", ">=": "<", ">": "<="}
_SCALES = {"request_time.hour": 24.0, "request_time.weekday": 7.0}
_UNKNOWN = object()


@dataclass(frozen=True, slots=True)
class AtomChange:
    """The change of one request feature that turns a failing atom.

    Attributes:
        feature: What changes (``request_time.hour``, ``the prompt``).
        old: Its value as the trace shows it.
        new: The value (or the kind of value) that turns the atom, as text.
        size: The change on a 0-1 scale: relative for numbers (hours over 24, weekdays over 7),
            1 for any other change (another category, a pattern matching).
    """

    feature: str
    old: str
    new: str
    size: float

    @property
    def says(self) -> str:
        """``had request_time.hour been 16``."""
        if self.feature == "the prompt":
            return f"had the prompt {self.new}"
        return f"had {self.feature} been {self.new}"


def atom_change(line: str) -> AtomChange | None:
    """The change that turns the atom ``line`` tells of (None: not a line the router writes)."""
    if (m := _FACT.match(line)) is not None and (got := _fact(m["label"], m["rest"])) is not None:
        return got
    if (m := _PATTERN.match(line)) is not None:
        turned = "matched" if m["verdict"] == "did not match" else "not matched"
        return AtomChange("the prompt", m["verdict"], f"{turned} {m['atom']}", 1.0)
    if (m := _GENERIC.match(line)) is not None:
        return AtomChange(m["atom"], m["verdict"], "false" if m["verdict"] == "true" else "true", 1.0)
    return None


def _fact(label: str, rest: str) -> AtomChange | None:
    shown, tail = _split_value(rest)
    value = _decode(shown)
    if value is _UNKNOWN:
        return None
    if (m := _MEMBER.match(tail)) is not None:
        items = _decode(m["items"])
        if not isinstance(items, list) or not items:
            return None
        if m["rel"] == "in":  # a `not in` atom: any value outside the list
            return AtomChange(label, shown, f"a value not in {m['items']}", 1.0)
        nearest = min(items, key=lambda i: abs(i - value)) if _numbers(value, *items) else items[0]
        return AtomChange(label, shown, json.dumps(nearest, ensure_ascii=False), _size(label, value, nearest))
    if (m := _COMPARE.match(tail)) is not None:
        rhs = _decode(m["rhs"])
        if rhs is _UNKNOWN:
            return None
        if m["rel"] == "!=":  # an `==` atom
            return AtomChange(label, shown, m["rhs"], _size(label, value, rhs))
        if m["rel"] == "==":  # a `!=` atom
            return AtomChange(label, shown, f"anything but {m['rhs']}", 1.0)
        return _ordered(label, shown, value, _ATOM_OP[m["rel"]], rhs)
    if (m := _UNORDERED.match(tail)) is not None:
        rhs = _decode(m["rhs"])
        return None if rhs is _UNKNOWN else _ordered(label, shown, None, m["op"], rhs)
    if tail == ", not true":
        return AtomChange(label, shown, "true", 1.0)
    if tail == ", not null":
        return AtomChange(label, shown, "null", 1.0)
    if tail == "" and isinstance(value, bool):
        return AtomChange(label, shown, json.dumps(not value), 1.0)
    if tail == "" and value is None:
        return AtomChange(label, shown, "set (not null)", 1.0)
    return None


def _ordered(label: str, shown: str, value: Any, op: str, bound: Any) -> AtomChange | None:
    """The nearest value for which ``feature <op> bound`` holds (ints step by one; floats are 'above x')."""
    if not _numbers(bound):
        return None
    if isinstance(bound, int) and (value is None or isinstance(value, int)):
        new: Any = bound + 1 if op == ">" else bound - 1 if op == "<" else bound
        text = str(new)
    else:
        new = bound
        text = {">": f"above {bound}", ">=": f"{bound} or more", "<": f"below {bound}", "<=": f"{bound} or less"}[op]
    return AtomChange(label, shown, text, _size(label, value, new) if value is not None else 1.0)


def _split_value(rest: str) -> tuple[str, str]:
    """The value as shown (a quoted string may hold spaces) and what follows it."""
    if rest.startswith('"'):
        i = 1
        while i < len(rest):
            if rest[i] == "\\":
                i += 2
                continue
            if rest[i] == '"':
                return rest[:i + 1], rest[i + 1:]
            i += 1
        return rest, ""  # cut at 60 characters: no closing quote
    if rest.startswith("<") and ">" in rest:  # <redacted>, or <withheld: 26 chars, sha256:…>: opaque
        end_at = rest.index(">") + 1
        return rest[:end_at], rest[end_at:]
    end = re.match(r"[^\s,]*", rest)
    token = end.group(0) if end else ""
    return token, rest[len(token):]


def _decode(shown: str) -> Any:
    if shown.startswith("<") and shown.endswith(">"):  # a value the trace does not hold (redacted, withheld)
        return shown
    try:
        return json.loads(shown)
    except ValueError:
        return _UNKNOWN


def _numbers(*values: Any) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _size(label: str, old: Any, new: Any) -> float:
    if not _numbers(old, new):
        return 1.0
    scale = _SCALES.get(label) or max(abs(old), abs(new), 1.0)
    return float(min(abs(new - old) / scale, 1.0))
