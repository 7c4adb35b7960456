"""The cases file of ``routelens intents eval``: one JSON object a line, ``{"text": ..., "expected": ROUTE or null}``.

Read whole and checked before the classifier is fitted: a missing file, a byte not UTF-8 or a line
that is not such a case is refused as :class:`~app.cli._common.BadInput` naming the file and line.
:mod:`app.cli.intents` re-exports :func:`read_cases`.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from app.cli._common import BadInput, err

__all__ = ["read_cases"]


def _read_lines(path: str) -> list[str]:
    """The lines of the UTF-8 text file ``path``; BadInput naming the file (and the line of a byte not UTF-8)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = len(raw[raw.rfind(b"\n", 0, exc.start) + 1:exc.start].decode("utf-8")) + 1  # characters, as editors
        raise BadInput(f"{path}:{line}: not UTF-8: byte 0x{raw[exc.start]:02x} at column {column}") from exc


def read_cases(path: str) -> list[tuple[str, str | None]]:
    """Read the cases file: ``(text, expected)`` per non-blank line.

    Raises:
        BadInput: The file is missing or not UTF-8, or a line is not a JSON object with a string ``text``.
    """
    return [(text, expected) for _, text, expected in _numbered_cases(path)]


_CASE_KEYS = ("text", "expected")
_CASE_SHAPE = '{"text": ..., "expected": ROUTE or null}'


def _near_expected(key: str) -> bool:
    """A key that reads as a misspelt ``expected`` (``expect``, ``expectd``, ``Expected``...)."""
    return bool(difflib.get_close_matches(key.lower(), ["expected"], n=1, cutoff=0.75))


def _numbered_cases(path: str) -> list[tuple[int, str, str | None]]:
    lines = _read_lines(path)
    cases: list[tuple[int, str, str | None]] = []
    missing: list[int] = []  # lines without 'expected': read as null (out of scope), and said
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{path}:{no}: not JSON: {exc.msg}") from exc
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise BadInput(f"{path}:{no}: must be an object with a string 'text' ({_CASE_SHAPE})")
        # A misspelt 'expected' read as missing would count the case as out of scope: a wrong recall. Other
        # keys (an id, a source label) are the writer's own and are left alone: the interface is text and expected.
        if "expected" not in obj and (typo := next((k for k in obj if _near_expected(k)), None)) is not None:
            raise BadInput(f"{path}:{no}: unknown key {typo!r}: did you mean 'expected'? a case has the keys text and "
                           f"expected ({_CASE_SHAPE})")
        if "expected" not in obj:
            missing.append(no)
        expected = obj.get("expected")
        if expected is not None and not isinstance(expected, str):
            raise BadInput(f"{path}:{no}: 'expected' must be a route name or null")
        cases.append((no, obj["text"], expected))
    if not cases:
        raise BadInput(f"{path}: no cases")
    if missing:
        err.print(f"[yellow]warning:[/yellow] {path}: {len(missing)} case(s) without 'expected' (line "
                  f"{', '.join(map(str, missing[:5]))}{', ...' if len(missing) > 5 else ''}) read as out of scope "
                  "(null); write \"expected\": null to say so", soft_wrap=True)
    return cases
