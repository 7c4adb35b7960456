"""What the README shows, read from its markdown: its first Python block and the commands in its tables."""

from __future__ import annotations

import re

__all__ = ["PREFIXES", "first_python_block", "printed_model", "table_commands"]

PREFIXES = ("routelens ", "python -m bench ")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")  # a `\|` inside a cell is a literal bar, not a column
_FIRST_CODE = re.compile(r"`([^`]+)`")
_STOP_CHARS = ("=", "<", "|")


def first_python_block(markdown: str) -> str:
    """The body of the first fenced ```python block; AssertionError when there is none."""
    match = re.search(r"^```python[ \t]*\n(.*?)^```[ \t]*$", markdown, re.M | re.S)
    assert match, "the README has no ```python block"
    return match.group(1)


def printed_model(block: str) -> str:
    """The model a block's ``# prints: req_… MODEL`` comment says its request lands on."""
    match = re.search(r"^#\s*prints:\s*\S+\s+(\S+)\s*$", block, re.M)
    assert match, f"the README's first python block has no '# prints: req_… MODEL' line:\n{block}"
    return match.group(1)


def _is_argument(word: str) -> bool:
    """A word that is no longer part of the command's name: an option, a placeholder or a value template."""
    return word.startswith(("-", "[")) or word.isupper() or any(c in word for c in _STOP_CHARS)


def table_commands(markdown: str) -> list[tuple[str, list[str]]]:
    """Every distinct command a table row of ``markdown`` starts with, as ``(prefix, words)``.

    A row counts when its first cell opens with a backticked ``routelens …`` or ``python -m bench …``;
    the words kept are the ones up to the first option, placeholder (UPPERCASE, ``<x>``), choice
    (``a|b``) or assignment.
    """
    found: list[tuple[str, list[str]]] = []
    for line in markdown.splitlines():
        if not line.lstrip().startswith("|"):
            continue
        cells = _CELL_SPLIT.split(line.strip())
        first = cells[1].strip() if len(cells) > 1 else ""
        match = _FIRST_CODE.match(first)
        if not match:
            continue
        text = match.group(1).replace("\\|", "|")
        prefix = next((p for p in PREFIXES if text.startswith(p)), None)
        if prefix is None:
            continue
        words: list[str] = []
        for word in text[len(prefix):].split():
            if _is_argument(word):
                break
            words.append(word)
        if (prefix, words) not in found:
            found.append((prefix, words))
    return found
