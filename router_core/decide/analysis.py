"""Request analysis: what the router may know about a chat request.

The query text exists only inside :func:`analyse_request`'s caller for as long as it takes to
hash it; only :class:`schemas.trace.RequestFeatures` and the hash go further.

The input the model reads is more than the messages' text: the tool (and legacy function)
definitions a chat template renders into the prompt, and the calls earlier assistant turns made
(their names and arguments). Those count in ``input_chars`` and ``est_input_tokens``, what the
context-window check and a policy's ``input_length`` read (an agent's tool schemas are often most
of its prompt); they are neither the query nor its language. Images and audio count in
``est_input_tokens`` too (not in ``input_chars``): an image by OpenAI's tile rule from the size its
header gives (a remote or unreadable one as the largest the rule allows), audio at about 10 tokens a
second (:mod:`router_core.decide.media_tokens`); ``file`` parts (PDF...) count nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from router_core.decide.attachments import Attachment, inspect_attachments
from router_core.errors import InvalidRequest
from router_core.intents.rules import Intent, classify_intent
from schemas.chat_text import MalformedContent, content_text, last_user_index
from schemas.common import Language
from schemas.config.attachments import AttachmentSettings
from schemas.trace import RequestFeatures

__all__ = ["Analysis", "analyse_request", "estimate_tokens"]

_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
_NO_SETTINGS = AttachmentSettings()


@dataclass(frozen=True, slots=True)
class Analysis:
    """Features of a request, its rule-scored intent, the query text to hash (never to store), its attachments."""

    features: RequestFeatures
    query_text: str
    intent: Intent
    attachments: tuple[Attachment, ...] = ()


_SHORT = 256  # characters: below this a loop over them beats numpy's set-up


def count_cjk_latin(text: str) -> tuple[int, int]:
    """The CJK ideographs (U+3400-4DBF, U+4E00-9FFF) and ASCII letters in ``text``.

    Long texts are counted over their code points in numpy: a Python loop costs about 0.2 µs a
    character, 4 ms for a 20,000-character conversation (0.1 ms this way).
    """
    if len(text) < _SHORT:
        cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf")
        return cjk, sum(1 for ch in text if ch.isascii() and ch.isalpha())
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    n_cjk = np.count_nonzero(((points >= 0x4E00) & (points <= 0x9FFF)) | ((points >= 0x3400) & (points <= 0x4DBF)))
    folded = points | 0x20  # A-Z onto a-z; nothing outside ASCII lands in a-z
    return int(n_cjk), int(np.count_nonzero((folded >= 0x61) & (folded <= 0x7A)))


def estimate_tokens(cjk: int, other: int) -> int:
    """Estimate tokens: about one per CJK character, one per four other characters."""
    return cjk + (other + 3) // 4


def _language(cjk: int, latin: int) -> Language:
    if cjk == 0 and latin == 0:
        return Language.UNKNOWN
    if cjk and latin and min(cjk, latin) / (cjk + latin) > 0.2:
        return Language.MIXED
    return Language.ZH if cjk > latin else Language.EN


def _text_of(content: Any, index: int) -> tuple[str, bool]:
    """Return (text, has_attachment) of one message's content (:func:`schemas.chat_text.content_text`).

    Raises:
        InvalidRequest: When the content is malformed; ``param`` names the message's content.
    """
    try:
        return content_text(content)
    except MalformedContent as exc:
        raise InvalidRequest(str(exc), param=f"messages[{index}].content") from exc


def _as_text(value: Any) -> str:
    """A string as it is; any other JSON value as compact JSON (how a template renders a schema, about)."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # not JSON (a dry run's body built in Python): its repr's length will do
        return str(value)


def _call_texts(call: Any) -> list[str]:
    """The name and arguments of one ``tool_calls`` entry or legacy ``function_call`` (malformed: nothing)."""
    fn = call.get("function") if isinstance(call, dict) and "function" in call else call
    if not isinstance(fn, dict):
        return []
    return [_as_text(fn[k]) for k in ("name", "arguments") if fn.get(k) is not None]


def _tool_texts(body: dict[str, Any], messages: list[Any]) -> list[str]:
    """Input besides the messages' content: tool and function definitions, the calls assistants made.

    Any shape is read without failing: what RouteLens does not model is passed on as sent, and an
    instance refuses what it cannot use.
    """
    out = [_as_text(body[k]) for k in ("tools", "functions") if body.get(k) is not None]
    for msg in messages:
        calls = msg.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            out += _call_texts(call)
        out += _call_texts(msg.get("function_call"))
    return out


def _max_tokens(body: dict[str, Any]) -> tuple[Any, str]:
    """The completion's token limit and the field it came from: ``max_completion_tokens`` unless null or absent."""
    value = body.get("max_completion_tokens")
    return (value, "max_completion_tokens") if value is not None else (body.get("max_tokens"), "max_tokens")


def analyse_request(body: Any, *, max_chars: int = 20_000, attachments: AttachmentSettings = _NO_SETTINGS) -> Analysis:
    """Validate the parts of a chat request the router relies on and extract its features.

    The query is the text of the last user message. Analysis looks at most ``max_chars`` of the
    conversation (tool definitions and calls after the messages); the features say whether the
    input was cut. Attachments are typed by their bytes
    (:func:`router_core.decide.attachments.inspect_attachments`, only when a part carries one);
    ``file_types`` lists each one's :attr:`~router_core.decide.attachments.Attachment.type`: the detected
    type wins, the declared one counts only where bytes cannot contradict it. Images' and audio's
    estimated tokens (:attr:`~router_core.decide.attachments.Attachment.tokens`) are added to
    ``est_input_tokens`` after the text's (which alone is extrapolated past the cut).

    Raises:
        InvalidRequest: When the body is not a chat-completions request, or an attachment is
            malformed or larger than ``attachments.max_bytes``.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' is required and must be a non-empty array", param="messages")
    model = body.get("model", "auto")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string", param="model")
    max_tokens, limit_field = _max_tokens(body)
    if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 0):  # a bool is no integer
        raise InvalidRequest(f"'{limit_field}' must be a non-negative integer", param=limit_field)
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):  # "false" would read as a stream
        raise InvalidRequest("'stream' must be a boolean", param="stream")

    total_chars, cjk, latin, attached, query = 0, 0, 0, False, ""
    user = last_user_index(messages)
    budget = max_chars
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(role := msg.get("role"), str) or role not in _ROLES:
            raise InvalidRequest(f"messages[{i}] must be an object with a valid 'role'", param=f"messages[{i}]")
        text, has_part = _text_of(msg.get("content"), i)
        if i == user:
            query = text
        attached = attached or has_part
        total_chars += len(text)
        seen = text[:budget]
        budget -= len(seen)
        n_cjk, n_latin = count_cjk_latin(seen)
        cjk += n_cjk
        latin += n_latin
    language = _language(cjk, latin)  # of what people wrote, not of the schemas around it
    for text in _tool_texts(body, messages):
        total_chars += len(text)
        seen = text[:budget]
        budget -= len(seen)
        cjk += count_cjk_latin(seen)[0]
    analysed = max_chars - budget
    other = analysed - cjk
    scale = total_chars / analysed if analysed else 1.0  # extrapolate tokens past the cut
    found = inspect_attachments(messages, attachments) if attached else []
    features = RequestFeatures(
        requested_model=model,
        n_messages=len(messages),
        input_chars=total_chars,
        est_input_tokens=round(estimate_tokens(cjk, other) * scale) + (sum(a.tokens for a in found) if found else 0),
        max_tokens=max_tokens,
        stream=stream is True,
        language=language,
        has_attachments=attached,
        file_types=[a.type for a in found],
        analysed_chars=analysed,
        truncated=analysed < total_chars,
    )
    return Analysis(features=features, query_text=query, intent=classify_intent(query, max_chars),
                    attachments=tuple(found))
