"""Header values that are not UTF-8: found once, at the door, before any part of the gateway reads them.

aiohttp decodes header bytes as UTF-8 with ``surrogateescape``: a byte that is not UTF-8 becomes a
lone surrogate (U+DC80-U+DCFF) in the value's ``str``, and such a string cannot be encoded again.
Read further in, one crashed the whole process (mmh3 5.3.1 dereferences NULL on it: the experiment
bucket and session affinity), made a 500 of a client throttle's digest, and lost the trace of a
request whose policy read it (orjson refuses it). :func:`invalid_header` finds such a value so that
``errors_middleware`` answers OpenAI's 400 ``invalid_header`` first, for every route.

Names need no check: aiohttp's parser refuses a byte outside the token alphabet in a header name
(and in the request line) before any handler runs. Cost per request: ``str.isascii()`` reads a flag
CPython keeps with every string, so a request whose values are all ASCII pays one call per header
(0.25-0.30 µs of CPU for ten headers, about three ``headers.get()``); only a value that is not
ASCII is encoded to be checked (0.65 µs with one such value among eleven).

A body sent compressed (``Content-Encoding`` other than ``identity``) is refused too, with OpenAI's
shape and a 415 (:func:`coded_body`): inflating it would be work on the event loop that its sender
controls (1 MB of gzip is 1 GiB of zeros: seconds in which no request is served), and no OpenAI
client compresses its requests. The servers read bodies as sent (``auto_decompress`` off in
:data:`ingest.http_api.answers.SERVER_LIMITS`), so nothing is inflated before this refusal either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from aiohttp import web

from router_core.errors import InvalidRequest, UnsupportedEncoding

__all__ = ["HEADER_REFUSAL", "HeaderRefusal", "coded_body", "invalid_header", "is_utf8", "refusal_of"]


class HeaderRefusal(Protocol):
    """What an application registers under :data:`HEADER_REFUSAL` to trace these refusals as its others."""

    def __call__(self, request: web.Request, exc: InvalidRequest) -> web.StreamResponse | None:
        """The answer to ``request``, refused with ``exc``; None: not this request's (answered untraced)."""
        ...


HEADER_REFUSAL = web.AppKey("routelens.header_refusal", HeaderRefusal)  # registered by the gateway (chat)

_MAX_NAME = 64  # of a header's name in the message (a token, so printable ASCII)


def is_utf8(value: str) -> bool:
    """Whether ``value`` holds no lone surrogate, i.e. came from bytes that are UTF-8."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def invalid_header(headers: Mapping[str, str]) -> str | None:
    """The name of the first header whose value is not UTF-8 (None: every value is)."""
    for value in headers.values():  # the fast path: values only, no name looked up
        if not value.isascii():
            break
    else:
        return None
    for name, value in headers.items():
        if not value.isascii() and not is_utf8(value):
            return name
    return None


def coded_body(coding: str) -> UnsupportedEncoding | None:
    """The 415 of a request body sent with ``Content-Encoding: coding`` (None: ``identity``, or empty)."""
    if coding.strip().lower() in ("", "identity"):
        return None
    shown = coding[:_MAX_NAME] + ("..." if len(coding) > _MAX_NAME else "")
    return UnsupportedEncoding(f"request bodies are read as sent: send it uncompressed (Content-Encoding: {shown})",
                               param="Content-Encoding", code="unsupported_content_encoding")


def refusal_of(name: str) -> InvalidRequest:
    """The 400 of a header whose value is not UTF-8: it names the header, never the value."""
    shown = name[:_MAX_NAME] + ("..." if len(name) > _MAX_NAME else "")
    return InvalidRequest(f"the value of header {shown} is not valid UTF-8", param=shown, code="invalid_header")
