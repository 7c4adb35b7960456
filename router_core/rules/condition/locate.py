"""Positions in the policy file, and syntax errors a business user can read.

A condition is often a piece of a bigger file (a YAML value, a DSL clause). Lark counts lines and
columns from the start of the piece; :class:`Locator` moves them to the file: the first line is
shifted by the column the piece starts at, later lines keep their own column.
"""

from __future__ import annotations

from dataclasses import dataclass

from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from router_core.errors import PolicyError

__all__ = ["MAX_ERRORS", "Locator", "policy_error", "syntax_error"]

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

    def at_offset(self, offset: int) -> tuple[int, int]:
        """Return the file position of character ``offset`` (0-based) of the text."""
        before = self.text[:offset]
        line = before.count("\n") + 1
        return self.at(line, offset - (before.rfind("\n") + 1) + 1)

    def end(self) -> tuple[int, int]:
        """Return the text position just after its last non-blank character."""
        stripped = self.text.rstrip()
        return stripped.count("\n") + 1, len(stripped) - (stripped.rfind("\n") + 1) + 1

    def error(self, line: int, col: int, message: str) -> PolicyError:
        """Return a :class:`PolicyError` at ``line``/``col`` of the text."""
        return PolicyError(self.source, [(*self.at(line, col), message)])


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
