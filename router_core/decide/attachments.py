"""Attachments of a chat request, typed by their bytes (``filetype``), never by their declared name.

A content part carries an attachment when it is an ``image_url`` (a base64 data URL, or a remote
``http(s)`` URL), a ``file`` (base64 ``file_data``, plain or as a data URL, or a ``file_id``) or an
``input_audio`` (base64 ``data`` with a ``format``). Inline bytes are sized from the base64 length
(an attachment over ``max_bytes`` is refused before anything is decoded), checked to be base64 in
full (a C-speed ``bytes.translate``, not a decode), and only a prefix is decoded: the
:data:`SIGNATURE_BYTES` ``filetype`` itself reads from a file, which its zip-based matchers
(docx, xlsx, pptx...) need to see past the first entries of the archive. Remote URLs and file ids
are not fetched: their type is what their name declares.

A declared type is the client's own text (a file name's suffix, a URL path's, a MIME subtype, an
audio ``format``): it is kept only when it is a type name the gateway knows
(:data:`schemas.config.attachments.NAMED_TYPES`); any other reads
``unknown``, so a file named ``Notes re. John Doe HIV test`` stores no part of its name in the trace.

Each image and audio part also gets its estimated input tokens from that prefix
(:mod:`router_core.decide.media_tokens`: an image's size from its header, a remote image as the
largest; audio's seconds). ``file`` parts (PDF...) count none: there is no published rule.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

import filetype  # type: ignore[import-untyped]

from router_core.decide.media_tokens import audio_tokens, image_tokens
from router_core.errors import InvalidRequest
from schemas.config.attachments import NAMED_TYPES, UNKNOWN_TYPE, AttachmentSettings, normalise_type

__all__ = ["SIGNATURE_BYTES", "Attachment", "attachment_infos", "inspect_attachments", "refuse_unacceptable"]

SIGNATURE_BYTES = 8192  # what filetype.utils.get_bytes reads of a file: its matchers look no further
_PREFIX_CHARS = -(-SIGNATURE_BYTES // 3) * 4  # base64 characters encoding at least SIGNATURE_BYTES
_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_DETECTABLE = frozenset(normalise_type(t.extension) for t in filetype.types)
_BY_MIME: dict[str, str] = {}
for _t in filetype.types:
    _BY_MIME.setdefault(_t.mime, normalise_type(_t.extension))
_BY_MIME.update({"image/jpg": "jpg", "image/pjpeg": "jpg", "audio/wav": "wav", "audio/wave": "wav",
                 "audio/mp3": "mp3", "text/plain": "txt", "text/markdown": "md", "text/csv": "csv",
                 "text/html": "html", "application/json": "json"})
_UNTYPED_MIMES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
# type -> how a message names it (with its article)
_LABELS = {"pdf": "a PDF", "docx": "a Word document", "doc": "a Word 97-2003 document", "xlsx": "an Excel workbook",
           "xls": "an Excel 97-2003 workbook", "pptx": "a PowerPoint presentation", "odt": "an OpenDocument text",
           "zip": "a ZIP archive", "png": "a PNG image", "jpg": "a JPEG image", "gif": "a GIF image",
           "webp": "a WebP image", "wav": "a WAV audio file", "mp3": "an MP3 audio file", "txt": "a plain text file"}


@dataclass(frozen=True, slots=True)
class Attachment:
    """One attachment of a request.

    Attributes:
        message: Index of the message in ``messages``.
        part: Index of the part in that message's ``content``.
        declared: The type its MIME type or name declares (``pdf``, ``docx``...; None: none declared).
        detected: The type its bytes show (None: not recognised, or not carried inline).
        size: Decoded size in bytes (0 when the bytes are not in the request).
        inline: Whether the bytes are in the request (False for a remote URL or a file id).
        tokens: Estimated input tokens of an image or audio part (0 for a ``file`` part).
    """

    message: int
    part: int
    declared: str | None
    detected: str | None
    size: int
    inline: bool
    tokens: int = 0

    @property
    def where(self) -> str:
        """The part, as OpenAI's ``error.param`` names it."""
        return f"messages[{self.message}].content[{self.part}]"

    @property
    def mismatch(self) -> bool:
        """Whether the bytes show another type than the declared one (both known)."""
        return self.declared is not None and self.detected is not None and self.declared != self.detected

    @property
    def type(self) -> str:
        """The type routing goes by (``RequestFeatures.file_types``).

        The detected type; else the declared one where bytes cannot contradict it (no bytes
        inline, or a type ``filetype`` has no matcher for, like ``txt``); else ``unknown``: a
        declared ``pdf`` whose bytes ``filetype`` does not recognise is no PDF.
        """
        if self.detected is not None:
            return self.detected
        if self.declared is not None and (not self.inline or self.declared not in _DETECTABLE):
            return self.declared
        return UNKNOWN_TYPE


def _from_mime(mime: str) -> str | None:
    if mime in _UNTYPED_MIMES:
        return None
    if (short := _BY_MIME.get(mime)) is not None:
        return short
    sub = mime.partition("/")[2].partition("+")[0]
    return normalise_type(sub.removeprefix("x-").removeprefix("vnd.")) or None


def _from_name(name: str) -> str | None:
    return normalise_type(PurePosixPath(name).suffix) or None


def _declared(kind: str | None) -> str | None:
    """A declared type as a trace may hold it: a type name the gateway knows, else ``unknown`` (not client text)."""
    return kind if kind is None or kind in NAMED_TYPES else UNKNOWN_TYPE


def _bad(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(message, param=param, code="invalid_attachment")


def _data_url(url: str, param: str) -> tuple[str | None, str]:
    """Split ``data:[<mime>][;params];base64,<data>`` into (declared type, base64 data)."""
    comma = url.find(",")
    if comma < 0:
        raise _bad("a data URL needs a ',' before its data", param)
    params = url[5:comma].split(";")
    if params[-1].strip().lower() != "base64":
        raise _bad("a data URL must be base64-encoded (data:<mime type>;base64,<data>)", param)
    mime = params[0].strip().lower()
    if mime and "/" not in mime:
        raise _bad(f"a data URL's media type must be type/subtype, not {mime[:40]!r}", param)
    return _from_mime(mime), url[comma + 1:]


def _base64(data: str, param: str, max_bytes: int) -> tuple[int, bytes]:
    """Return (decoded size, decoded prefix) of base64 ``data``, checked in full but decoded in part.

    Raises:
        InvalidRequest: Not base64, or larger than ``max_bytes`` (told from the length alone).
    """
    n = len(data)
    if n % 4:
        raise _bad(f"invalid base64: its length ({n}) is not a multiple of 4", param)
    pad = 2 if data.endswith("==") else 1 if data.endswith("=") else 0
    size = n // 4 * 3 - pad
    if size > max_bytes:
        raise InvalidRequest(f"the attachment is {size} bytes; the limit is {max_bytes}", param=param,
                             code="attachment_too_large")
    if not data.isascii():
        raise _bad("invalid base64: non-ASCII characters", param)
    raw = data.encode("ascii")
    if raw.translate(None, _B64_ALPHABET + b"=") or raw.find(b"=", 0, n - pad) >= 0:
        raise _bad("invalid base64: characters outside A-Z a-z 0-9 + / or misplaced '=' padding", param)
    try:
        prefix = binascii.a2b_base64(data[:_PREFIX_CHARS], strict_mode=True)
    except binascii.Error as exc:
        raise _bad(f"invalid base64: {exc}", param) from exc
    return size, prefix


def _detect(prefix: bytes) -> str | None:
    kind = filetype.guess(prefix)
    return None if kind is None else normalise_type(str(kind.extension))


def _no_tokens(prefix: bytes, size: int) -> int:
    return 0


def _inline(message: int, index: int, declared: str | None, data: str, param: str,
            settings: AttachmentSettings, count: Callable[[bytes, int], int] = _no_tokens) -> Attachment:
    """The attachment carried by base64 ``data``; ``count`` gives its tokens from (decoded prefix, size)."""
    if data[:5].lower() == "data:":
        from_url, data = _data_url(data, param)
        declared = declared or from_url
    size, prefix = _base64(data, param, settings.max_bytes)
    return Attachment(message, index, _declared(declared), _detect(prefix), size, inline=True,
                      tokens=count(prefix, size))


def _object(part: Mapping[str, Any], key: str, param: str) -> Mapping[str, Any]:
    value = part.get(key)
    if not isinstance(value, Mapping):
        raise _bad(f"'{key}' must be an object", param)
    return value


def _string(obj: Mapping[str, Any], key: str, param: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise _bad(f"'{key}' must be a string", f"{param}.{key}")
    return value


def _inspect_part(i: int, j: int, part: Mapping[str, Any], settings: AttachmentSettings) -> Attachment | None:
    kind, at = part.get("type"), f"messages[{i}].content[{j}]"
    if kind == "image_url":
        image = _object(part, "image_url", f"{at}.image_url")
        url = _string(image, "url", f"{at}.image_url") or ""
        detail = image.get("detail")
        if url[:5].lower() == "data:":
            return _inline(i, j, None, url, f"{at}.image_url.url", settings,
                           lambda prefix, _size: image_tokens(prefix, detail))
        if url[:7].lower() == "http://" or url[:8].lower() == "https://":
            return Attachment(i, j, _declared(_from_name(unquote(urlsplit(url).path))), None, 0, inline=False,
                              tokens=image_tokens(None, detail))
        raise _bad("'image_url.url' must be an http(s) URL or a base64 data URL", f"{at}.image_url.url")
    if kind == "file":
        file = _object(part, "file", f"{at}.file")
        name = _string(file, "filename", f"{at}.file", required=False)
        declared = _from_name(name) if name else None  # the name the user gave beats a data URL's MIME
        data = _string(file, "file_data", f"{at}.file", required=False)
        if data is not None:
            return _inline(i, j, declared, data, f"{at}.file.file_data", settings)
        if _string(file, "file_id", f"{at}.file", required=False) is None:
            raise _bad("'file' needs 'file_data' or 'file_id'", f"{at}.file")
        return Attachment(i, j, _declared(declared), None, 0, inline=False)
    if kind == "input_audio":
        audio = _object(part, "input_audio", f"{at}.input_audio")
        fmt = _string(audio, "format", f"{at}.input_audio", required=False)
        data = _string(audio, "data", f"{at}.input_audio") or ""
        return _inline(i, j, normalise_type(fmt) if fmt else None, data, f"{at}.input_audio.data", settings,
                       audio_tokens)
    return None  # text, refusal, or a part type this router does not know: nothing to type


def inspect_attachments(messages: Sequence[Any], settings: AttachmentSettings) -> list[Attachment]:
    """Return the attachments of ``messages`` in order, typed by their bytes.

    Raises:
        InvalidRequest: A malformed data URL or part, invalid base64, or an attachment larger than
            ``settings.max_bytes``; ``param`` names the field (``messages[1].content[0].image_url.url``).
    """
    out = []
    for i, msg in enumerate(messages):
        content = msg.get("content") if isinstance(msg, Mapping) else None
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            if isinstance(part, Mapping) and (found := _inspect_part(i, j, part, settings)) is not None:
                out.append(found)
    return out


def _label(kind: str) -> str:
    return _LABELS.get(kind, f"a {kind} file")


def refuse_unacceptable(attachments: Sequence[Attachment], settings: AttachmentSettings,
                        models: Sequence[str]) -> None:
    """Refuse a request with an attachment none of ``models`` accepts (``settings.accept``).

    Raises:
        InvalidRequest: ``unsupported_attachment_type`` on the part, naming the detected type and
            the declared one when they differ.
    """
    if not settings.accept or not models:
        return
    for a in attachments:
        kind = a.type
        if any(settings.accepts(m, kind) for m in models):
            continue
        if kind == UNKNOWN_TYPE:
            said = f"is of a type its bytes do not tell{f' (declared as {a.declared})' if a.declared else ''}"
        elif a.detected is None:
            said = f"is declared as {_label(kind)} ({kind})"
        else:
            said = f"is {_label(kind)} ({kind})"
            if a.mismatch and a.declared is not None:
                said += f" although declared as {_label(a.declared).partition(' ')[2]}"
        raise InvalidRequest(f"the attachment in {a.where} {said}; no model here accepts {kind}", param=a.where,
                             code="unsupported_attachment_type")


def attachment_infos(attachments: Sequence[Attachment]) -> list[dict[str, Any]]:
    """The attachments as :class:`schemas.trace_policy.AttachmentInfo` fields, for the policy step."""
    return [{"message": a.message, "part": a.part, "declared": a.declared, "detected": a.detected,
             "bytes": a.size, "mismatch": a.mismatch} for a in attachments]
