"""Images' and audio's input tokens from their header bytes (media_tokens); real bytes built here."""

from __future__ import annotations

import io
import struct
import wave
from dataclasses import dataclass

import pytest
from PIL import Image

from router_core.decide.attachments import SIGNATURE_BYTES
from router_core.decide.media_tokens import (
    LOW_DETAIL_TOKENS,
    MAX_IMAGE_TOKENS,
    audio_tokens,
    image_size,
    image_tokens,
    tile_tokens,
)


@dataclass(frozen=True)
class TileCase:
    id: str
    width: int
    height: int
    tokens: int


TILE_CASES = [
    # OpenAI's worked examples: 1024x1024 -> 768x768, 4 tiles; 2048x4096 -> 1024x2048 -> 768x1536, 6 tiles.
    TileCase("openai-1024-square", 1024, 1024, 765),
    TileCase("openai-2048x4096", 2048, 4096, 1105),
    TileCase("small-not-upscaled", 100, 100, 255),
    TileCase("exactly-one-tile", 512, 512, 255),
    TileCase("one-px-over-a-tile", 513, 512, 425),
    TileCase("wide-strip-8-tiles", 2048, 768, 1445),
    TileCase("fit-then-shortest-side", 4000, 2000, 1105),  # 2048x1024 -> 1536x768: 3 x 2 tiles
    TileCase("thin-line", 1, 10_000, 765),  # 1x2048 after fitting: never a zero-pixel side
    TileCase("huge-square", 30_000, 30_000, 765),
]


@pytest.mark.parametrize("case", TILE_CASES, ids=lambda c: c.id)
def test_tile_rule(case: TileCase) -> None:
    assert tile_tokens(case.width, case.height) == case.tokens
    assert tile_tokens(case.height, case.width) == case.tokens  # the rule has no orientation


def test_the_largest_image_is_the_maximum_of_the_rule() -> None:
    sides = range(64, 4097, 64)
    found = max(tile_tokens(w, h) for w in sides for h in sides)
    assert found == MAX_IMAGE_TOKENS == 1445


def encode(fmt: str, size: tuple[int, int], mode: str = "RGB", **kw: object) -> bytes:
    out = io.BytesIO()
    Image.new(mode, size).save(out, fmt, **kw)
    return out.getvalue()


@dataclass(frozen=True)
class HeaderCase:
    id: str
    fmt: str
    mode: str
    options: dict[str, object]
    marker: tuple[int, bytes]  # (offset, bytes) proving which header layout the encoder wrote


HEADER_CASES = [
    HeaderCase("png", "PNG", "RGB", {}, (12, b"IHDR")),
    HeaderCase("jpeg-baseline-sof0", "JPEG", "RGB", {}, (0, b"\xff\xd8\xff")),
    HeaderCase("jpeg-progressive-sof2", "JPEG", "RGB", {"progressive": True}, (0, b"\xff\xd8\xff")),
    HeaderCase("gif87a", "GIF", "P", {}, (0, b"GIF87a")),
    HeaderCase("gif89a", "GIF", "P", {"transparency": 0}, (0, b"GIF89a")),
    HeaderCase("webp-lossy-vp8", "WEBP", "RGB", {}, (12, b"VP8 ")),
    HeaderCase("webp-lossless-vp8l", "WEBP", "RGB", {"lossless": True}, (12, b"VP8L")),
    HeaderCase("webp-alpha-vp8x", "WEBP", "RGBA", {}, (12, b"VP8X")),
]


@pytest.mark.parametrize("case", HEADER_CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("size", [(640, 480), (2500, 1100), (333, 2049)])
def test_sizes_read_from_headers_pillow_wrote(case: HeaderCase, size: tuple[int, int]) -> None:
    data = encode(case.fmt, size, case.mode, **case.options)
    at, marker = case.marker
    assert data[at:at + len(marker)] == marker
    assert image_size(data[:SIGNATURE_BYTES]) == size
    assert image_tokens(data[:SIGNATURE_BYTES]) == tile_tokens(*size)
    assert image_tokens(data[:SIGNATURE_BYTES], "low") == LOW_DETAIL_TOKENS


def test_the_jpeg_marker_that_says_which_sof() -> None:
    baseline, progressive = encode("JPEG", (64, 48)), encode("JPEG", (64, 48), progressive=True)
    assert b"\xff\xc0" in baseline and b"\xff\xc2" in progressive  # SOF0, SOF2: both read
    assert image_size(baseline) == image_size(progressive) == (64, 48)


def with_comment(jpeg: bytes, length: int) -> bytes:
    """The JPEG with a COM segment of ``length`` bytes right after SOI: its SOF moves that far on."""
    return jpeg[:2] + b"\xff\xfe" + struct.pack(">H", length + 2) + b"c" * length + jpeg[2:]


def test_a_jpeg_whose_sof_lies_past_the_prefix_counts_as_the_largest() -> None:
    jpeg = encode("JPEG", (100, 100))
    near, far = with_comment(jpeg, 1000), with_comment(jpeg, SIGNATURE_BYTES)
    assert image_size(near[:SIGNATURE_BYTES]) == (100, 100) and image_tokens(near[:SIGNATURE_BYTES]) == 255
    assert image_size(far[:SIGNATURE_BYTES]) is None
    assert image_tokens(far[:SIGNATURE_BYTES]) == MAX_IMAGE_TOKENS
    assert image_size(far) == (100, 100)  # the walk itself is right: only the prefix stops it


@pytest.mark.parametrize("prefix", [
    b"",
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00",  # cut inside IHDR
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + bytes(8),  # 0x0
    b"\xff\xd8\xff\xda\x00\x08",  # SOS before any SOF
    b"\xff\xd8\xff\xe0\x00\x01",  # a segment length below 2
    b"\xff\xd8\x00\x00\x00\x00",  # not at a marker
    b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(20),  # no VP8 start code
    b"%PDF-1.4\n",
    b"not an image at all",
], ids=["empty", "png-cut", "png-zero", "jpeg-sos-first", "jpeg-bad-length", "jpeg-no-marker", "webp-no-start",
        "pdf", "text"])
def test_unreadable_headers_count_as_the_largest(prefix: bytes) -> None:
    assert image_size(prefix) is None
    assert image_tokens(prefix) == image_tokens(prefix, "auto") == image_tokens(prefix, "high") == MAX_IMAGE_TOKENS
    assert image_tokens(prefix, "low") == LOW_DETAIL_TOKENS


def test_an_image_not_in_the_request_counts_as_the_largest() -> None:
    assert image_tokens(None) == MAX_IMAGE_TOKENS and image_tokens(None, "low") == LOW_DETAIL_TOKENS


def wav(seconds: float, rate: int = 8000, width: int = 2, channels: int = 1) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(bytes(int(seconds * rate) * width * channels))
    return out.getvalue()


def chunk(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack("<I", len(payload)) + payload + b"\0" * (len(payload) & 1)


def riff_wave(*chunks: bytes) -> bytes:
    body = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


FMT_16K = chunk(b"fmt ", struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16))  # 16,000 bytes a second


@pytest.mark.parametrize(("data", "tokens"), [
    (wav(2.5), 25),  # 40,000 bytes at 16,000 B/s
    (wav(1.0, rate=44100, channels=2), 10),
    (wav(0.01), 1),  # a part of a second still costs a token
    (wav(0.0), 0),
    (riff_wave(FMT_16K, chunk(b"LIST", bytes(101)), chunk(b"data", bytes(32_000))), 20),  # odd chunk padded
    # The data chunk lies past the prefix: what follows the last chunk read is taken as audio.
    (riff_wave(FMT_16K, chunk(b"LIST", bytes(SIGNATURE_BYTES)), chunk(b"data", bytes(16_000))), 10),
    # A streamed WAV leaves the data size unset: the bytes present count.
    (riff_wave(FMT_16K, b"data" + struct.pack("<I", 0xFFFFFFFF) + bytes(48_000)), 30),
], ids=["mono-16bit", "stereo-44k", "short", "empty", "padded-list-chunk", "data-past-prefix", "streamed"])
def test_wav_seconds_from_its_byte_rate(data: bytes, tokens: int) -> None:
    assert audio_tokens(data[:SIGNATURE_BYTES], len(data)) == tokens


def test_a_wav_whose_byte_rate_is_past_the_prefix_falls_back_to_the_assumed_bitrate() -> None:
    data = riff_wave(chunk(b"LIST", bytes(SIGNATURE_BYTES)), FMT_16K, chunk(b"data", bytes(16_000)))
    assert audio_tokens(data[:SIGNATURE_BYTES], len(data)) == -(-len(data) // 1600)  # 16,000 B/s would say 10


@pytest.mark.parametrize(("size", "tokens"), [(160_000, 100), (16_000, 10), (1, 1), (0, 0)])
def test_other_audio_at_128_kbit_s(size: int, tokens: int) -> None:
    mp3 = (b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(size))[:size]
    assert audio_tokens(mp3[:SIGNATURE_BYTES], size) == tokens  # 128 kbit/s: 16,000 bytes a second
