r"""The syntax probe: the seed's "Hello world" request, and a strict look at what came back.

An answer passes only when it is HTTP 200, valid UTF-8, JSON, valid against OpenAI's
``CreateChatCompletionResponse`` (the runtime copy in :mod:`probes.contracts`; an absent
``message.refusal`` counts as null, :func:`probes.contracts.probe_schema`), and its content
is neither empty nor garbled: no U+FFFD replacement characters, no control characters other
than ``\n``, ``\t`` and ``\r``, and no mojibake by :func:`ftfy.badness.is_bad`. The reason names
the first thing that was wrong. :func:`read_content` is shared with the semantic probe.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from functools import cache
from typing import Any

from ftfy.badness import is_bad
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

from probes.contracts import probe_schema
from probes.http import ChatCall
from probes.types import Judgement
from schemas.common import ProbeVerdict
from schemas.config.probes import ProbeSettings

__all__ = ["garbled_reason", "judge_syntax", "read_content", "syntax_body", "upstream_error"]

_ALLOWED_CONTROL = frozenset("\n\t\r")


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(probe_schema())


def syntax_body(settings: ProbeSettings, model: str) -> dict[str, Any]:
    """The syntax probe's request body."""
    return {"model": model, "messages": [{"role": "user", "content": settings.syntax.prompt}],
            "max_tokens": settings.syntax.max_tokens, "stream": False}


def _path(parts: Sequence[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def upstream_error(body: bytes | None) -> str:
    """The upstream's own error message (OpenAI's ``{"error": {"message"}}``), else the body's start."""
    if not body:
        return "empty body"
    try:
        message = json.loads(body)["error"]["message"]
        if isinstance(message, str):
            return message[:300]
    except (ValueError, KeyError, TypeError):
        pass
    return body[:200].decode("utf-8", "replace")


def garbled_reason(text: str) -> str | None:
    """Why ``text`` is garbled (replacement characters, control characters, mojibake), or None."""
    replacements = text.count("\ufffd")
    if replacements:
        return f"{replacements} replacement character{'s' if replacements > 1 else ''} (U+FFFD)"
    controls = [ch for ch in text if unicodedata.category(ch) == "Cc" and ch not in _ALLOWED_CONTROL]
    if controls:
        return f"{len(controls)} control character{'s' if len(controls) > 1 else ''} (first U+{ord(controls[0]):04X})"
    if is_bad(text):
        return "mojibake (text decoded with the wrong charset)"
    return None


def read_content(call: ChatCall) -> tuple[str, None] | tuple[None, Judgement]:
    """The first choice's content of a valid answer, or the failed :class:`Judgement` saying why not."""

    def fail(error_class: str, reason: str) -> tuple[None, Judgement]:
        return None, Judgement(ProbeVerdict.FAILED, 0.0, 1.0, reason, error_class, latency_ms=call.elapsed_ms)

    if call.error_class is not None:
        return fail(call.error_class, call.error)
    if call.status != 200:
        return fail("http_status", f"HTTP {call.status}: {upstream_error(call.body)}")
    raw = call.body or b""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return fail("encoding", f"body is not valid UTF-8: {exc.reason} at byte {exc.start}")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return fail("not_json", f"body is not JSON ({len(raw)} bytes): {exc}")
    error = best_match(_validator().iter_errors(doc))
    if error is not None:
        return fail("schema", f"{_path(list(error.absolute_path))}: {error.message}"[:500])
    choices = doc["choices"]
    if not choices:
        return fail("schema", "choices: the answer has no choices")
    content = choices[0]["message"].get("content")
    if not isinstance(content, str) or not content.strip():
        return fail("empty", "content is empty")
    garbled = garbled_reason(content)
    if garbled is not None:
        return fail("garbled", f"content is garbled: {garbled}")
    return content, None


def judge_syntax(call: ChatCall) -> Judgement:
    """Judge one syntax probe answer: ``ok`` (value 1) or ``failed`` (value 0) with the reason."""
    _, failed = read_content(call)
    if failed is not None:
        return failed
    return Judgement(ProbeVerdict.OK, 1.0, 1.0, "", None, latency_ms=call.elapsed_ms)
