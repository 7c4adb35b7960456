"""Positions in the policy file, and syntax errors a business user can read.

A condition is often a piece of a bigger file (a YAML value, a DSL clause). Lark counts lines and
columns from the start of the piece; :class:`Locator` moves them to the file as if the piece were
copied verbatim from it: the first line is shifted by the column the piece starts at, later lines
keep their own column. A YAML value is such a copy only on its first line (block scalars strip
the indentation, folded ones join lines, quotes decode escapes): :class:`ScalarMap` takes the
Locator's answer on through the value to where its characters really are in the file.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from router_core.errors import PolicyError

__all__ = ["MAX_ERRORS", "Locator", "ScalarMap", "policy_error", "scalar_map", "syntax_error"]

MAX_ERRORS = 20  # listed per PolicyError; a pasted blob should not print ten thousand lines

# What the parser's terminal names mean, in the order they are listed in "expected ..." messages.
_FRIENDLY: dict[str, str] = {
    "NAME": "a feature or function name",
    "STRING": "a string in quotes",
    "NUMBER": "a number",
    "TRUE": "true",
    "FALSE": "false",
    "NULL": "null",
    "COMP_OP": "a comparison (==, !=, <, <=, >, >=)",
    "IN_OR_NOT_IN": "in or not in",
    "_NOT": "NOT (!)",
    "_AND": "AND (&&)",
    "_OR": "OR (||)",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COMMA": "','",
    "DOT": "'.'",
    "EQUAL": "'='",
    "IF": "IF",
    "_THEN": "THEN",
    "ELSE": "ELSE",
    "ROUTE_TO": "route_to",
    "_WITH": "WITH",
    "BARE": "a value",
}


@dataclass(frozen=True)
class Locator:
    """Maps positions in ``text`` (1-based, as lark gives them) to positions in the file.

    Attributes:
        text: The piece being compiled.
        source: The file name errors carry.
        line: The file line ``text`` starts on.
        col: The file column ``text`` starts at.
    """

    text: str
    source: str
    line: int = 1
    col: int = 1

    def at(self, line: int, col: int) -> tuple[int, int]:
        """Return the file position of ``line``/``col`` of the text."""
        return self.line + line - 1, (col + self.col - 1) if line == 1 else col

    def end(self) -> tuple[int, int]:
        """Return the text position just after its last non-blank character."""
        stripped = self.text.rstrip()
        return stripped.count("\n") + 1, len(stripped) - (stripped.rfind("\n") + 1) + 1

    def error(self, line: int, col: int, message: str) -> PolicyError:
        """Return a :class:`PolicyError` at ``line``/``col`` of the text."""
        return PolicyError(self.source, [(*self.at(line, col), message)])


Segment = tuple[int, int, int]  # (offset in the value, file line, file column): the value runs on from there


@dataclass(frozen=True)
class ScalarMap:
    """Where the characters of a YAML scalar's value are in its file (build it with :func:`scalar_map`).

    Attributes:
        text: The value, as YAML read it.
        line: The file line the value is handed to the compilers as starting on.
        col: The file column it is handed to them as starting at.
        segments: Sorted by offset; a value the map cannot follow has none, and positions stay as given.
    """

    text: str
    line: int = 1
    col: int = 1
    segments: tuple[Segment, ...] = ()

    def to_file(self, line: int, col: int) -> tuple[int, int]:
        """Return the file position of ``line``/``col`` as a :class:`Locator` at :attr:`line`/:attr:`col` gave it."""
        t_line = line - self.line + 1
        if not self.segments or not 1 <= t_line < len(self._starts):
            return line, col
        start, end = self._starts[t_line - 1], self._starts[t_line] - 1
        offset = start + max(1, col - self.col + 1 if t_line == 1 else col) - 1
        past = max(0, offset - end)  # after the line's last character: "the condition ends too early"
        offset -= past
        at, seg_line, seg_col = self.segments[max(0, bisect_right(self._offsets, offset) - 1)]
        return seg_line, seg_col + max(0, offset - at) + past

    @cached_property
    def _starts(self) -> list[int]:
        """The offset each line of the text starts at, and one past the end (a DSL asks once per clause)."""
        return [0, *(i + 1 for i, ch in enumerate(self.text) if ch == "\n"), len(self.text) + 1]

    @cached_property
    def _offsets(self) -> list[int]:
        return [s[0] for s in self.segments]


_ESCAPE_LEN = {"x": 4, "u": 6, "U": 10}  # a double-quoted \xXX, \uXXXX, \UXXXXXXXX; every other escape is 2


def _tokens(piece: str, style: str | None) -> list[tuple[int, str, int]]:
    r"""Split one source line of a scalar into ``(index, raw, n)`` pieces.

    ``n < 0``: text the value copies as it is. Otherwise an escape that makes ``n`` characters of the
    value: a quoted scalar's ``\n`` or ``''`` makes 1, a ``\`` ending the line (which joins it to the next) 0.
    """
    out: list[tuple[int, str, int]] = []
    i = done = 0
    while style in ('"', "'") and i < len(piece):
        if style == '"' and piece[i] == "\\":
            raw = piece[i:i + _ESCAPE_LEN.get(piece[i + 1:i + 2], 2)]
        elif style == "'" and piece.startswith("''", i):
            raw = "''"
        else:
            i += 1
            continue
        out += [(done, piece[done:i], -1)] if i > done else []
        out.append((i, raw, 0 if i + 1 == len(piece) else 1))
        i = done = i + len(raw)
    return out + ([(done, piece[done:], -1)] if done < len(piece) else [])


def _trim(piece: str, style: str | None) -> str:
    r"""One source line of a scalar without the blanks around it, but for an escaped one (``\ `` ending it)."""
    text = piece.strip()
    body = piece.lstrip()
    if style == '"' and len(text) < len(body) and (len(text) - len(text.rstrip("\\"))) % 2:
        text = body[:len(text) + 1]
    return text


def scalar_map(value: str, lines: Sequence[str], style: str | None, start: tuple[int, int],
               end: tuple[int, int]) -> ScalarMap:
    """Map ``value``, the scalar YAML read from ``lines`` between the (0-based) marks ``start`` and ``end``.

    Each source line's text, stripped of the blanks YAML folds or strips, is found in the value after
    the blanks that stand for the line break; an escape stands for one character. Should the source
    stop matching the value (it does not, for anything PyYAML reads), the map ends there and later
    positions run on from its last segment.

    Args:
        value: The scalar's value.
        lines: The file's lines.
        style: The node's style: ``"|"``, ``">"``, a quote, or None for a plain scalar.
        start: The node's start mark (the indicator of a block scalar, the quote of a quoted one).
        end: The node's end mark.
    """
    block, quoted = style in ("|", ">"), style in ('"', "'")
    first = start[0] + 1 if block else start[0]
    last = min(len(lines) - 1, end[0] - (1 if block and end[1] == 0 else 0))
    pieces = []
    for n in range(first, last + 1):
        lo = start[1] + quoted if n == start[0] else 0
        hi = end[1] - quoted if n == end[0] and not block else len(lines[n])
        pieces.append((n, lo, lines[n][lo:hi]))
    if block:
        head = lines[first] if first < len(lines) else ""
        line, col = first + 1, len(head) - len(head.lstrip()) + 1
    else:
        line, col = start[0] + 1, start[1] + 1 + quoted
    segments: list[Segment] = []
    at, blank, joined = 0, 0, False  # blank lines since the last line with text; did that line end in a "\\"
    for n, lo, piece in pieces:
        lo += len(piece) - len(piece.lstrip())
        tokens = _tokens(_trim(piece, style), style)
        for k, (i, raw, width) in enumerate(tokens):
            if k == 0 and width < 0:  # past the blanks that stand for the line break, or lead the value
                while at < len(value) and value[at].isspace():
                    at += 1
            elif k == 0 and n == start[0]:  # a quoted value that starts with an escape keeps its leading blanks
                at = lo - (start[1] + quoted)
            elif k == 0 and not joined:  # the break folded to a space, or to a newline per blank line
                at += blank or 1
            if width < 0 and not value.startswith(raw, at):
                return ScalarMap(value, line, col, tuple(segments))
            segments.append((at, n + 1, lo + i + 1))
            at += len(raw) if width < 0 else width
        blank, joined = (blank + 1, joined) if not tokens else (0, tokens[-1][2] == 0)
    return ScalarMap(value, line, col, tuple(segments))


def policy_error(source: str, errors: list[tuple[int, int, str]]) -> PolicyError:
    """Return one error listing ``errors`` in file order, the first :data:`MAX_ERRORS` of them."""
    errors = sorted(errors)
    if len(errors) > MAX_ERRORS:
        line, col, _ = errors[MAX_ERRORS]
        errors = [*errors[:MAX_ERRORS], (line, col, f"and {len(errors) - MAX_ERRORS} more problems")]
    return PolicyError(source, errors)


def _expected(names: set[str]) -> str:
    """Render terminal names as a readable "a, b or c"."""
    if "_IN" in names:  # after an operand NOT can only start "not in"
        names = (names - {"_NOT", "_IN"}) | {"IN_OR_NOT_IN"}
    words = [w for k, w in _FRIENDLY.items() if k in names]
    if "$END" in names:
        words.append("the end")
    if not words:
        return ""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def syntax_error(exc: UnexpectedInput, loc: Locator, what: str = "condition") -> PolicyError:
    """Translate a lark error into a :class:`PolicyError` at the offending position.

    Args:
        exc: The parser's error.
        loc: The locator of the text that was parsed.
        what: What the text is, for messages ("condition", "DSL").
    """
    if isinstance(exc, UnexpectedCharacters):
        found, hint = f"unexpected {exc.char!r}", ""
        parser = exc.interactive_parser
        expected = set(parser.accepts()) if parser else set(exc.allowed or ())  # type: ignore[no-untyped-call]
        if exc.char in "&|":
            hint = "; use && or AND, || or OR"
        elif exc.char in "'\"":
            found, hint = "unterminated string", " (a string ends on the line it starts)"
        line, col = exc.line, exc.column
    elif isinstance(exc, UnexpectedToken):
        tok = exc.token
        expected = set(exc.accepts or exc.expected)
        hint = "; use == to compare" if tok.type == "EQUAL" and "COMP_OP" in expected else ""
        if tok.type == "$END":
            if not loc.text.strip():
                return loc.error(1, 1, f"the {what} is empty")
            found, (line, col) = f"the {what} ends too early", loc.end()
        else:
            found, line, col = f"unexpected {str(tok)!r}", tok.line or 1, tok.column or 1
    else:  # UnexpectedEOF: the LALR parser reports the end as a $END token, kept for safety
        expected, hint, found = set(getattr(exc, "expected", ())), "", f"the {what} ends too early"
        line, col = loc.end()
    exp = _expected(expected)
    message = found + (f"; expected {exp}" if exp else "") + hint
    return loc.error(line, col, message)
