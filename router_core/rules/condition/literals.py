"""Literal values as written in a condition: strings with escapes, numbers, true/false/null."""

from __future__ import annotations

from typing import Any

from lark import Token

__all__ = ["BadLiteral", "number", "string"]

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0"}


class BadLiteral(ValueError):
    """A literal that does not decode; ``offset`` is where, from the literal's first character."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


def string(token: Token) -> str:
    r"""Decode a quoted string: ``\n \t \r \\ \' \" \0`` and ``\uXXXX``.

    Raises:
        BadLiteral: On an unknown escape or a bad ``\u``.
    """
    raw = str(token)[1:-1]
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        esc = raw[i + 1]  # the grammar guarantees a character after a backslash
        if esc in _ESCAPES:
            out.append(_ESCAPES[esc])
            i += 2
        elif esc == "u":
            digits = raw[i + 2:i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise BadLiteral("\\u needs four hex digits, as in \\u00e9", i + 1)
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            raise BadLiteral(f"unknown escape '\\{esc}' (known: \\n \\t \\r \\\\ \\' \\\" \\0 \\uXXXX)", i + 1)
    return "".join(out)


def number(token: Token) -> Any:
    """Return an int when written without a point or exponent, else a float.

    Raises:
        BadLiteral: When the number is not finite (``1e999``) or has over 40 characters.
    """
    text = str(token)
    if len(text) > 40:  # int() refuses thousands of digits; nobody routes on 10**40
        raise BadLiteral(f"{text[:12]}... has too many digits")
    if not any(c in text for c in ".eE"):
        return int(text)
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise BadLiteral(f"{text} is too large")
    return value
