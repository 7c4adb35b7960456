"""Images and audio count in a request's estimated input tokens, so a small window is kept out of reach.

Real bytes built here with the stdlib; the expected figures are OpenAI's published image rule (85 at low
detail; 170 a 512-px tile + 85 after scaling into 2048x2048 and to a 768-px shortest side; 1445 for an
image whose size is not known) and 10 tokens a second of audio.
"""

from __future__ import annotations

import base64
import io
import struct
import wave
import zlib
from typing import Any

from router_core.decide.analysis import analyse_request
from router_core.decide.attachments import inspect_attachments
from schemas.config.attachments import AttachmentSettings
from tests.router_core.conftest import decide, healthy
from tests.router_core.plugin_kit import assert_filter_step, plugins_config

TEXT = "Describe what these pictures have in common."


def png(width: int, height: int) -> bytes:
    """A real 1-bit greyscale PNG of ``width`` x ``height`` (all black)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\x00" + bytes(-(-width // 8))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b""))


def gif(width: int, height: int) -> bytes:
    """A GIF89a header and a 1x1 frame on a ``width`` x ``height`` logical screen."""
    return (b"GIF89a" + struct.pack("<HHBBB", width, height, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
            + b"\x2c" + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + b"\x02\x02\x44\x01\x00\x3b")


def wav(seconds: float, rate: int = 16000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(int(seconds * rate) * 2))
    return out.getvalue()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def image(raw: bytes | None = None, mime: str = "image/png", detail: str | None = None,
          url: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"url": url or f"data:{mime};base64,{b64(raw or b'')}"}
    if detail is not None:
        ref["detail"] = detail
    return {"type": "image_url", "image_url": ref}


def body(*parts: dict[str, Any], max_tokens: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"model": "auto",
                           "messages": [{"role": "user", "content": [{"type": "text", "text": TEXT}, *parts]}]}
    if max_tokens is not None:
        out["max_tokens"] = max_tokens
    return out


def tokens(*parts: dict[str, Any]) -> int:
    return analyse_request(body(*parts)).features.est_input_tokens


def test_each_image_adds_its_tiles_to_the_estimate() -> None:
    text = tokens()
    assert text > 0
    assert tokens(image(png(1024, 1024))) - text == 765  # 768x768: 4 tiles
    assert tokens(image(png(2048, 4096))) - text == 1105  # 768x1536: 6 tiles
    assert tokens(image(png(100, 100))) - text == 255  # never up-scaled: 1 tile
    assert tokens(image(gif(2048, 768), "image/gif")) - text == 1445
    assert tokens(image(png(4096, 8192), detail="low")) - text == 85
    assert tokens(image(png(1024, 1024)), image(png(100, 100), detail="low")) - text == 765 + 85
    for detail in ("auto", "high"):
        assert tokens(image(png(1024, 1024), detail=detail)) - text == 765


def test_input_chars_stay_the_text() -> None:
    assert (analyse_request(body(image(png(1024, 1024)))).features.input_chars
            == analyse_request(body()).features.input_chars)


def test_images_whose_size_is_not_known_count_as_the_largest() -> None:
    text = tokens()
    remote = image(url="https://example.com/cat.png")
    assert tokens(remote) - text == 1445  # never fetched
    assert tokens(image(url="https://example.com/cat.png", detail="low")) - text == 85
    assert tokens(image(png(1024, 1024)[:20])) - text == 1445  # cut inside IHDR
    jpeg_sof_far = b"\xff\xd8\xff\xfe" + struct.pack(">H", 9002) + b"c" * 9000 + b"\xff\xc0\x00\x11\x08\x00\x10"
    assert tokens(image(jpeg_sof_far + b"\x00\x10\x03" + bytes(9) + b"\xff\xd9", "image/jpeg")) - text == 1445
    found = inspect_attachments(body(remote)["messages"], AttachmentSettings())
    assert [(a.inline, a.tokens) for a in found] == [(False, 1445)]


def test_audio_counts_ten_tokens_a_second() -> None:
    text = tokens()
    assert tokens({"type": "input_audio", "input_audio": {"data": b64(wav(3.0)), "format": "wav"}}) - text == 30
    mp3 = b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(160_000 - 10)  # 10 s at the assumed 128 kbit/s
    assert tokens({"type": "input_audio", "input_audio": {"data": b64(mp3), "format": "mp3"}}) - text == 100


def test_files_count_nothing() -> None:
    pdf = b"%PDF-1.4\n1 0 obj <</Type /Catalog>> endobj\ntrailer <</Root 1 0 R>>\n%%EOF\n" + bytes(50_000)
    part = {"type": "file", "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{b64(pdf)}"}}
    analysis = analyse_request(body(part))
    assert analysis.features.file_types == ["pdf"]
    assert analysis.features.est_input_tokens == tokens()


def test_images_past_a_small_window_keep_the_request_off_that_model() -> None:
    cfg = plugins_config([{"type": "context-window-filter", "name": "fits"}, {"type": "kv-cache-scorer", "weight": 1}])
    ten_big = [image(png(2048, 2048)) for _ in range(10)]  # 765 tokens each (768x768 after scaling)

    text_only = analyse_request(body(max_tokens=1000)).features
    ranked, trace = decide(healthy(), cfg, feats=text_only)
    assert "small-a" in ranked  # a few text tokens + 1000 fit small-a's 8192
    assert_filter_step(trace, "fits", "context-window-filter", kept=3, rejected=[])

    with_images = analyse_request(body(*ten_big, max_tokens=1000)).features
    assert with_images.est_input_tokens == text_only.est_input_tokens + 7650
    assert with_images.file_types == ["png"] * 10
    ranked, trace = decide(healthy(), cfg, feats=with_images)
    assert ranked == ["big-b", "big-a"]
    assert_filter_step(trace, "fits", "context-window-filter", kept=2, rejected=["small-a"])
    assert trace.features.est_input_tokens == with_images.est_input_tokens

    low = analyse_request(body(*[image(png(2048, 2048), detail="low") for _ in range(10)], max_tokens=1000)).features
    assert "small-a" in decide(healthy(), cfg, feats=low)[0]  # 850 tokens of low-detail images fit
