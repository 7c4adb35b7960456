"""Docstrings and field descriptions as Markdown, for the configuration reference's page and its tables.

reST roles are dropped and Markdown's specials escaped outside code spans; a docstring's ``::``
literal blocks become fenced YAML. Used by :mod:`app.config_reference`.
"""

from __future__ import annotations

import inspect
import re

__all__ = ["cell", "markdown", "prose"]

_CODE_SPAN = re.compile(r"(`[^`\n]*`)")
_RST_ROLE = re.compile(r":[a-z]+:(?=`)")
_LONE_STAR = re.compile(r"(?<!\*)\*(?!\*)")


def _escape(text: str) -> str:
    text = text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace("<", "&lt;")
    return _LONE_STAR.sub("\\*", text).replace("|", "\\|")


def markdown(text: str) -> str:
    """Docstring or description text as Markdown: roles dropped, specials escaped outside code spans.

    A code span holding ``|`` becomes escaped text: a table cell could not hold it otherwise in both
    Python-Markdown (MkDocs) and GitHub's Markdown.
    """
    parts = _CODE_SPAN.split(_RST_ROLE.sub("", text.replace("``", "`")))
    for i, part in enumerate(parts):
        if i % 2 == 0 or "|" in part:
            parts[i] = _escape(part.strip("`") if i % 2 else part)
    return "".join(parts)


def prose(doc: str) -> str:
    """A reST docstring as Markdown: its ``::`` literal blocks become fenced YAML, the rest :func:`markdown`."""
    out: list[str] = []
    lines = inspect.cleandoc(doc).splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.rstrip().endswith("::"):
            out.append(markdown(line))
            i += 1
            continue
        head = line.rstrip()[:-1].rstrip()
        if head and head != ":":
            out.append(markdown(head if head.endswith(":") else head + ":"))
        block: list[str] = []
        i += 1
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
            block.append(lines[i])
            i += 1
        code = inspect.cleandoc("\n".join(block))
        out += (["", "```yaml", code, "```", ""] if out and out[-1] else ["```yaml", code, "```", ""])
    return "\n".join(out).strip()


def cell(text: str) -> str:
    """``text`` on one line, for a table cell."""
    return " ".join(text.split())
