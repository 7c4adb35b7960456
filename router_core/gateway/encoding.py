"""Content codings between an upstream and the client.

The gateway's client session does not decompress (``auto_decompress=False``): a body reaches the
client as the client asked for it. When the client's ``Accept-Encoding`` accepts the upstream's
``Content-Encoding`` the bytes pass through with that header; otherwise they are decoded and sent
as identity. Either way the decoded body is what ``usage`` is read from. Only gzip and deflate are
decoded here, so only they are offered upstream (:data:`UPSTREAM_ACCEPT`); a body in another coding
that the client does not accept passes through labelled as it came, and its usage is not read.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

__all__ = ["UPSTREAM_ACCEPT", "Decoder", "ForClient", "accepts", "coding_of", "for_client"]

UPSTREAM_ACCEPT = "gzip, deflate"
_IDENTITY = {"", "identity"}


def coding_of(header: str | None) -> str:
    """The content coding named by a ``Content-Encoding`` header, lower-cased ('' for identity)."""
    coding = (header or "").strip().lower()
    return "" if coding in _IDENTITY else coding


def accepts(accept_encoding: str | None, coding: str) -> bool:
    """Whether an ``Accept-Encoding`` value accepts ``coding`` (named or ``*``, with q > 0).

    A missing header accepts nothing but identity here: decoding is always safe for the client.
    """
    weights: dict[str, float] = {}
    for item in (accept_encoding or "").split(","):
        name, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if name:
            weights[name.lower()] = q
    if coding in weights:
        return weights[coding] > 0
    return weights.get("*", 0.0) > 0


class Decoder:
    """Incremental decoder of a gzip or deflate body (a stream's chunks, or one whole body).

    Args:
        coding: ``gzip`` or ``deflate`` (zlib-wrapped or raw, as servers disagree).

    Raises:
        ValueError: The coding cannot be decoded here.
    """

    def __init__(self, coding: str) -> None:
        if coding not in ("gzip", "x-gzip", "deflate"):
            raise ValueError(f"cannot decode content coding {coding!r}")
        self._deflate = coding == "deflate"
        self._obj = zlib.decompressobj(zlib.MAX_WBITS | 16 if not self._deflate else zlib.MAX_WBITS)
        self._started = False

    @staticmethod
    def can_decode(coding: str) -> bool:
        """Whether :class:`Decoder` handles ``coding``."""
        return coding in ("gzip", "x-gzip", "deflate")

    def feed(self, data: bytes) -> bytes:
        """Decode the next piece; raises ``zlib.error`` on a corrupt body."""
        if self._deflate and not self._started and data:
            self._started = True
            try:
                return self._obj.decompress(data)
            except zlib.error:  # raw deflate, without the zlib header
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._obj.decompress(data)

    def flush(self) -> bytes:
        """What is left at the end of the body."""
        return self._obj.flush()


@dataclass(frozen=True, slots=True)
class ForClient:
    """A body as the client gets it.

    Attributes:
        payload: The bytes to send.
        encoding: The ``Content-Encoding`` to send with them (None: identity).
        plain: The decoded body (None when it could not be decoded), for reading ``usage``.
    """

    payload: bytes
    encoding: str | None
    plain: bytes | None


def for_client(body: bytes, content_encoding: str | None, accept_encoding: str | None) -> ForClient:
    """Decide how ``body`` (in the upstream's ``content_encoding``) reaches the client."""
    coding = coding_of(content_encoding)
    if not coding:
        return ForClient(body, None, body)
    plain: bytes | None = None
    if Decoder.can_decode(coding):
        try:
            dec = Decoder(coding)
            plain = dec.feed(body) + dec.flush()
        except zlib.error:
            plain = None  # corrupt: the client gets what the upstream sent, labelled as it came
    if accepts(accept_encoding, coding) or plain is None:
        return ForClient(body, content_encoding, plain)
    return ForClient(plain, None, plain)
