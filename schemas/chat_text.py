"""The query text of an OpenAI-style chat request, defined once for the gateway and the importer.

The query is the text of the last message whose ``role`` is ``"user"``. A message's content is
``None`` (no text), a string, or a list of part objects: the ``text`` of the parts whose ``type`` is
``"text"`` (and the ``refusal`` of an assistant's ``"refusal"`` parts, words it said) are joined with
newlines, and every other part is an attachment (an image, a file...). A missing or null text is empty.

These functions are strict: content of any other shape raises :class:`MalformedContent`. A caller
that must never fail (the trace importer) catches it and counts the content as empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MalformedContent", "content_text", "last_user_index", "last_user_text"]


_TEXT_PARTS = {"text": "text", "refusal": "refusal"}  # part type -> the field holding its words


class MalformedContent(ValueError):
    """A message content that is neither ``None``, a string, nor a list of part objects."""


def content_text(content: Any) -> tuple[str, bool]:
    """Return ``(text, has_attachment)`` of one message's content.

    Raises:
        MalformedContent: When the content is not ``None``, a string or a list of objects.
    """
    if content is None:
        return "", False
    if isinstance(content, str):
        return content, False
    if not isinstance(content, list):
        raise MalformedContent("content must be a string or a list of parts")
    texts, attached = [], False
    for part in content:
        if not isinstance(part, Mapping):
            raise MalformedContent("content parts must be objects")
        kind = part.get("type")
        field = _TEXT_PARTS.get(kind) if isinstance(kind, str) else None  # a list as type: no crash
        if field is not None:
            said = part.get(field)
            texts.append("" if said is None else str(said))
        else:
            attached = True
    return "\n".join(texts), attached


def last_user_index(messages: Sequence[Any]) -> int | None:
    """Return the index of the last message whose ``role`` is ``"user"``, or None if there is none.

    A message without a role is not a user message; entries that are not objects are skipped.
    """
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, Mapping) and msg.get("role") == "user":
            return i
    return None


def last_user_text(messages: Sequence[Any]) -> tuple[str, bool]:
    """Return ``(text, has_attachment)`` of the last user message, or ``("", False)`` if there is none.

    Raises:
        MalformedContent: When that message's content is malformed (other messages are not looked at).
    """
    i = last_user_index(messages)
    return content_text(messages[i].get("content")) if i is not None else ("", False)
