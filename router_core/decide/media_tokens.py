"""Input tokens of images and audio, estimated from the few bytes of their header the router decodes.

Images follow OpenAI's published rule for GPT-4o-class vision models: ``detail: "low"`` costs
:data:`LOW_DETAIL_TOKENS` (85); ``high``, ``auto``, an absent or any other ``detail`` scale the image
to fit within 2048x2048, then so its shortest side is 768 px (never up), and cost 170 tokens for
each 512-px tile plus 85. The size comes from the header in the decoded prefix
(:data:`router_core.decide.attachments.SIGNATURE_BYTES`): PNG ``IHDR``, JPEG ``SOFn`` (a marker
scan), GIF's logical screen, WebP ``VP8``/``VP8L``/``VP8X``. An image whose size cannot be read
there (a JPEG whose ``SOF`` lies past the prefix, a truncated or unknown header) or that is not in
the request (a remote URL is never fetched) counts as the largest the rule allows,
:data:`MAX_IMAGE_TOKENS` (1445: eight tiles), so a window check errs towards the larger model.

Audio is an estimate: :data:`AUDIO_TOKENS_PER_SECOND` (10) tokens a second. A WAV's seconds are
its ``data`` bytes over the byte rate its ``fmt`` chunk states; any other format's (MP3, ...) are
its size at an assumed :data:`ASSUMED_AUDIO_BITRATE` (128 kbit/s).
"""

from __future__ import annotations

__all__ = ["ASSUMED_AUDIO_BITRATE", "AUDIO_TOKENS_PER_SECOND", "LOW_DETAIL_TOKENS", "MAX_IMAGE_TOKENS",
           "audio_tokens", "image_size", "image_tokens", "tile_tokens"]

LOW_DETAIL_TOKENS = 85
_TILE_TOKENS = 170
_FIT = 2048  # px: the square a high-detail image is first scaled into
_SHORT_SIDE = 768  # px: then its shortest side is scaled down to this
_TILE = 512  # px
MAX_IMAGE_TOKENS = LOW_DETAIL_TOKENS + _TILE_TOKENS * 4 * 2  # 2048x768 after scaling: 4 x 2 tiles
AUDIO_TOKENS_PER_SECOND = 10  # an estimate (OpenAI bills audio input at about this rate)
ASSUMED_AUDIO_BITRATE = 128_000  # bit/s, for audio whose header gives no byte rate (MP3, ...)
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # SOF0-15 share a layout; C4/C8/CC are not SOFs
_JPEG_NO_LENGTH = frozenset(range(0xD0, 0xD8)) | {0x01, 0xD8}  # RSTn, TEM, SOI: markers without a segment


def _scaled(side: int, num: int, den: int) -> int:
    """``side * num / den`` rounded to the nearest pixel, never below one."""
    return max(1, (side * num + den // 2) // den)


def tile_tokens(width: int, height: int) -> int:
    """Tokens of a ``width`` x ``height`` image at high detail (OpenAI's tile rule)."""
    if (longest := max(width, height)) > _FIT:
        width, height = _scaled(width, _FIT, longest), _scaled(height, _FIT, longest)
    if (shortest := min(width, height)) > _SHORT_SIDE:
        width, height = _scaled(width, _SHORT_SIDE, shortest), _scaled(height, _SHORT_SIDE, shortest)
    tiles = -(-width // _TILE) * -(-height // _TILE)
    return LOW_DETAIL_TOKENS + _TILE_TOKENS * tiles


def image_tokens(prefix: bytes | None, detail: object = None) -> int:
    """Tokens of an image whose first bytes are ``prefix`` (None: not in the request) at ``detail``."""
    if detail == "low":
        return LOW_DETAIL_TOKENS
    size = image_size(prefix) if prefix is not None else None
    return MAX_IMAGE_TOKENS if size is None else tile_tokens(*size)


def _u16be(b: bytes, at: int) -> int:
    return int.from_bytes(b[at:at + 2], "big")


def _u24le(b: bytes, at: int) -> int:
    return int.from_bytes(b[at:at + 3], "little")


def _png(b: bytes) -> tuple[int, int] | None:
    if len(b) < 24 or b[12:16] != b"IHDR":
        return None
    return int.from_bytes(b[16:20], "big"), int.from_bytes(b[20:24], "big")


def _gif(b: bytes) -> tuple[int, int] | None:
    if len(b) < 10:
        return None
    return int.from_bytes(b[6:8], "little"), int.from_bytes(b[8:10], "little")


def _jpeg(b: bytes) -> tuple[int, int] | None:
    """Walk the marker segments from SOI to the first SOFn (or give up at SOS, EOI or the prefix's end)."""
    at, end = 2, len(b)
    while at + 4 <= end:
        if b[at] != 0xFF:
            return None  # not at a marker: a corrupt stream
        marker = b[at + 1]
        if marker == 0xFF:  # fill byte before a marker
            at += 1
            continue
        if marker in _JPEG_NO_LENGTH:
            at += 2
            continue
        if marker in (0xD9, 0xDA):  # EOI, or SOS: entropy-coded data follows, no SOF before it
            return None
        if marker in _JPEG_SOF:
            if at + 9 > end:
                return None
            return _u16be(b, at + 7), _u16be(b, at + 5)  # length(2) precision(1) height(2) width(2)
        length = _u16be(b, at + 2)
        if length < 2:
            return None
        at += 2 + length
    return None


def _webp(b: bytes) -> tuple[int, int] | None:
    chunk = b[12:16]
    if chunk == b"VP8 " and len(b) >= 30 and b[23:26] == b"\x9d\x01\x2a":
        return int.from_bytes(b[26:28], "little") & 0x3FFF, int.from_bytes(b[28:30], "little") & 0x3FFF
    if chunk == b"VP8L" and len(b) >= 25 and b[20] == 0x2F:
        bits = int.from_bytes(b[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(b) >= 30:
        return _u24le(b, 24) + 1, _u24le(b, 27) + 1
    return None


def image_size(prefix: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, JPEG, GIF or WebP header in ``prefix``; None when it cannot be read there."""
    if prefix[:8] == b"\x89PNG\r\n\x1a\n":
        size = _png(prefix)
    elif prefix[:3] == b"\xff\xd8\xff":
        size = _jpeg(prefix)
    elif prefix[:6] in (b"GIF87a", b"GIF89a"):
        size = _gif(prefix)
    elif prefix[:4] == b"RIFF" and prefix[8:12] == b"WEBP":
        size = _webp(prefix)
    else:
        size = None
    return size if size is not None and size[0] > 0 and size[1] > 0 else None


def _wav_data(prefix: bytes, size: int) -> tuple[int, int] | None:
    """(audio bytes, byte rate) of a RIFF/WAVE file of ``size`` bytes; None unless its byte rate is in ``prefix``."""
    byte_rate, at = 0, 12
    while at + 8 <= len(prefix):
        kind, length = prefix[at:at + 4], int.from_bytes(prefix[at + 4:at + 8], "little")
        if kind == b"fmt " and at + 20 <= len(prefix):
            byte_rate = int.from_bytes(prefix[at + 16:at + 20], "little")
        elif kind == b"data":
            # A streamed WAV leaves the data size at 0 or 0xFFFFFFFF: the bytes present are what counts.
            present = max(0, size - at - 8)
            return (min(length, present) if 0 < length < 0xFFFFFFFF else present, byte_rate) if byte_rate else None
        at += 8 + length + (length & 1)  # chunks are padded to an even length
    return (max(0, size - at - 8), byte_rate) if byte_rate else None  # past the prefix: the next chunk is data


def audio_tokens(prefix: bytes, size: int) -> int:
    """Estimated tokens of ``size`` bytes of audio whose first bytes are ``prefix`` (seconds x 10, rounded up)."""
    wav = _wav_data(prefix, size) if prefix[:4] == b"RIFF" and prefix[8:12] == b"WAVE" else None
    data, rate = wav if wav is not None else (size, ASSUMED_AUDIO_BITRATE // 8)
    return -(-data * AUDIO_TOKENS_PER_SECOND // rate)
