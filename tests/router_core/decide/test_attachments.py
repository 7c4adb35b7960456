"""Attachments typed by their bytes (filetype), never by their declared name; real bytes built here."""

from __future__ import annotations

import base64
import io
import socket
import struct
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any

import pytest

import router_core.decide.attachments as attachments_mod
from router_core.decide.analysis import analyse_request
from router_core.decide.attachments import (
    Attachment,
    attachment_infos,
    inspect_attachments,
    refuse_unacceptable,
)
from router_core.errors import InvalidRequest
from schemas.config.attachments import NAMED_TYPES, TYPE_ALIASES, AttachmentSettings
from schemas.trace_policy import AttachmentInfo

SETTINGS = AttachmentSettings()


def ooxml(folder: str, main: str) -> bytes:
    """A minimal Office Open XML package: ``[Content_Types].xml``, ``_rels/.rels`` and the main part."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", '<?xml version="1.0" encoding="UTF-8"?><Types xmlns='
                   '"http://schemas.openxmlformats.org/package/2006/content-types"/>')
        z.writestr("_rels/.rels", '<?xml version="1.0" encoding="UTF-8"?><Relationships/>')
        z.writestr(f"{folder}/{main}", '<?xml version="1.0" encoding="UTF-8"?><root/>')
    return out.getvalue()


def plain_zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("notes.txt", "a generic archive, not an office document")
    return out.getvalue()


def png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + b"\x00" * 64 + b"\xff\xd9"
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj <</Type /Catalog>> endobj\ntrailer <</Root 1 0 R>>\n%%EOF\n"
WAV = (b"RIFF" + struct.pack("<I", 36) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 8000, 1, 8)
       + b"data\0\0\0\0")
DOCX, XLSX, PPTX = ooxml("word", "document.xml"), ooxml("xl", "workbook.xml"), ooxml("ppt", "presentation.xml")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{b64(data)}"


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def file(data: bytes | None = None, filename: str | None = None, *, as_url: str | None = None,
         file_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if filename is not None:
        body["filename"] = filename
    if data is not None:
        body["file_data"] = data_url(as_url, data) if as_url else b64(data)
    if file_id is not None:
        body["file_id"] = file_id
    return {"type": "file", "file": body}


def audio(data: bytes, fmt: str) -> dict[str, Any]:
    return {"type": "input_audio", "input_audio": {"data": b64(data), "format": fmt}}


def messages(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "summarise this"}, *parts]}]


@dataclass(frozen=True)
class Case:
    id: str
    part: dict[str, Any]
    declared: str | None
    detected: str | None
    type: str
    mismatch: bool = False
    inline: bool = True


CASES = [
    Case("word-file-said-to-be-pdf", file(DOCX, "contract.pdf"), "pdf", "docx", "docx", mismatch=True),
    Case("word-file-as-pdf-data-url", file(DOCX, as_url="application/pdf"), "pdf", "docx", "docx", mismatch=True),
    Case("filename-beats-the-data-url-mime", file(DOCX, "c.docx", as_url="application/octet-stream"),
         "docx", "docx", "docx"),
    Case("docx-is-not-a-generic-zip", file(DOCX, "c.docx"), "docx", "docx", "docx"),
    Case("generic-zip", file(plain_zip(), "bundle.zip"), "zip", "zip", "zip"),
    Case("xlsx", file(XLSX, "sheet.xlsx"), "xlsx", "xlsx", "xlsx"),
    Case("pptx-said-to-be-docx", file(PPTX, "deck.docx"), "docx", "pptx", "pptx", mismatch=True),
    Case("pdf", file(PDF, "a.pdf"), "pdf", "pdf", "pdf"),
    Case("png", image(data_url("image/png", png())), "png", "png", "png"),
    Case("jpeg-spelled-jpeg", image(data_url("image/jpeg", JPEG)), "jpg", "jpg", "jpg"),
    Case("png-said-to-be-jpeg", image(data_url("image/jpeg", png())), "jpg", "png", "png", mismatch=True),
    Case("no-mime-in-the-data-url", image(data_url("", png())), None, "png", "png"),
    Case("wav-audio", audio(WAV, "wav"), "wav", "wav", "wav"),
    Case("text-file-typed-by-its-name", file(b"plain notes\n", "notes.txt"), "txt", None, "txt"),
    Case("fake-pdf-is-unknown", file(b"not a pdf at all", "a.pdf"), "pdf", None, "unknown"),
    Case("remote-url-by-its-extension", image("https://img.example.invalid/cat%20photo.JPEG?w=2"), "jpg", None,
         "jpg", inline=False),
    Case("remote-url-without-extension", image("https://img.example.invalid/render?id=3"), None, None, "unknown",
         inline=False),
    Case("file-id-by-its-filename", file(filename="scan.pdf", file_id="file-abc"), "pdf", None, "pdf", inline=False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_typed_by_the_bytes(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*_: Any, **__: Any) -> Any:
        raise AssertionError("an attachment was fetched")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    (a,) = inspect_attachments(messages(case.part), SETTINGS)
    assert (a.message, a.part, a.where) == (1, 1, "messages[1].content[1]")
    assert (a.declared, a.detected, a.type, a.mismatch, a.inline) == (
        case.declared, case.detected, case.type, case.mismatch, case.inline)
    if case.inline:
        raw = case.part.get("file", {}).get("file_data") or case.part.get("image_url", {}).get("url") \
            or case.part["input_audio"]["data"]
        assert a.size == len(base64.b64decode(raw.rpartition(",")[2]))
    else:
        assert a.size == 0


def test_text_only_requests_have_no_attachments() -> None:
    assert inspect_attachments([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}],
                               SETTINGS) == []


@dataclass(frozen=True)
class Bad:
    id: str
    part: dict[str, Any]
    param: str
    says: str


BAD = [
    Bad("data-url-without-comma", image("data:image/png;base64"), "image_url.url", "needs a ','"),
    Bad("data-url-not-base64", image("data:image/png,%89PNG"), "image_url.url", "base64-encoded"),
    Bad("data-url-bad-media-type", image("data:png;base64,iVBORw=="), "image_url.url", "type/subtype"),
    Bad("base64-length", image("data:image/png;base64,iVBORw0"), "image_url.url", "multiple of 4"),
    Bad("base64-charset", file(filename="a.pdf") | {"file": {"file_data": "JVBE!i0x"}}, "file.file_data",
        "outside A-Z"),
    Bad("base64-charset-past-the-prefix", file(filename="a.pdf") | {"file": {"file_data": b64(PDF * 400) + "*AAA"}},
        "file.file_data", "outside A-Z"),
    Bad("base64-padding-inside", image("data:image/png;base64,iV=RBORw"), "image_url.url", "misplaced '='"),
    Bad("base64-non-ascii", audio(WAV, "wav") | {"input_audio": {"data": "UklGRé==", "format": "wav"}},
        "input_audio.data", "non-ASCII"),
    Bad("not-a-url", image("ftp://example.com/a.png"), "image_url.url", "http(s) URL or a base64 data URL"),
    Bad("image-url-not-an-object", {"type": "image_url", "image_url": "https://x/a.png"}, "image_url",
        "must be an object"),
    Bad("file-without-data-or-id", file(filename="a.pdf"), "file", "'file_data' or 'file_id'"),
    Bad("audio-without-data", {"type": "input_audio", "input_audio": {"format": "wav"}}, "input_audio.data",
        "must be a string"),
]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_malformed_attachments_are_a_400_naming_the_field(case: Bad) -> None:
    with pytest.raises(InvalidRequest) as info:
        inspect_attachments(messages(case.part), SETTINGS)
    assert info.value.param == f"messages[1].content[1].{case.param}"
    assert info.value.code == "invalid_attachment" and case.says in str(info.value)


class Spy:
    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.real = attachments_mod.binascii.a2b_base64

    def __call__(self, data: str, *, strict_mode: bool = False) -> bytes:
        self.sizes.append(len(data))
        return self.real(data, strict_mode=strict_mode)


def test_over_the_limit_is_refused_from_the_length_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy()
    monkeypatch.setattr(attachments_mod.binascii, "a2b_base64", spy)
    size = 21 * 1024 * 1024  # over the default 20 MiB
    # Not even base64: only its length is looked at.
    with pytest.raises(InvalidRequest) as info:
        inspect_attachments(messages(image("data:image/png;base64," + "!" * (size // 3 * 4))), SETTINGS)
    assert info.value.code == "attachment_too_large" and info.value.param == "messages[1].content[1].image_url.url"
    assert f"is {size} bytes; the limit is {20 * 1024 * 1024}" in str(info.value)
    assert spy.sizes == []
    small = AttachmentSettings(max_bytes=len(PDF) - 1)
    with pytest.raises(InvalidRequest, match="attachment_too_large|the limit is"):
        inspect_attachments(messages(file(PDF, "a.pdf")), small)
    (a,) = inspect_attachments(messages(file(PDF, "a.pdf")), AttachmentSettings(max_bytes=len(PDF)))
    assert a.size == len(PDF)


def test_only_a_prefix_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy()
    monkeypatch.setattr(attachments_mod.binascii, "a2b_base64", spy)
    big = PDF + bytes(3 * 1024 * 1024)
    (a,) = inspect_attachments(messages(file(big, "big.pdf")), SETTINGS)
    assert (a.detected, a.size) == ("pdf", len(big))
    assert spy.sizes == [attachments_mod._PREFIX_CHARS]
    assert attachments_mod._PREFIX_CHARS * 3 // 4 >= attachments_mod.SIGNATURE_BYTES == 8192


WORD_AS_PDF = Attachment(message=1, part=0, declared="pdf", detected="docx", size=469, inline=True)


@dataclass(frozen=True)
class Refusal:
    id: str
    attachment: Attachment
    accept: dict[str, list[str]]
    models: list[str]
    message: str | None  # None: accepted


REFUSALS = [
    Refusal("word-as-pdf-nowhere-accepted", WORD_AS_PDF, {"m": ["pdf"], "n": ["pdf", "png"]}, ["m", "n"],
            "the attachment in messages[1].content[0] is a Word document (docx) although declared as PDF; "
            "no model here accepts docx"),
    Refusal("one-model-accepts-it", WORD_AS_PDF, {"m": ["pdf"], "n": ["docx"]}, ["m", "n"], None),
    Refusal("a-model-left-out-accepts-all", WORD_AS_PDF, {"m": ["pdf"]}, ["m", "other"], None),
    Refusal("only-the-requested-model-counts", WORD_AS_PDF, {"m": ["pdf"]}, ["m"],
            "the attachment in messages[1].content[0] is a Word document (docx) although declared as PDF; "
            "no model here accepts docx"),
    Refusal("no-accept-map", WORD_AS_PDF, {}, ["m"], None),
    Refusal("unknown-bytes", Attachment(0, 2, "pdf", None, 16, inline=True), {"m": ["pdf"]}, ["m"],
            "the attachment in messages[0].content[2] is of a type its bytes do not tell (declared as pdf); "
            "no model here accepts unknown"),
    Refusal("remote-declared", Attachment(0, 1, "gif", None, 0, inline=False), {"m": ["png", "jpeg"]}, ["m"],
            "the attachment in messages[0].content[1] is declared as a GIF image (gif); no model here accepts gif"),
    Refusal("aliases-folded", Attachment(0, 1, "jpg", "jpg", 10, inline=True), {"m": ["JPEG"]}, ["m"], None),
]


@pytest.mark.parametrize("case", REFUSALS, ids=lambda c: c.id)
def test_refuse_unacceptable(case: Refusal) -> None:
    settings = AttachmentSettings(accept=case.accept)
    if case.message is None:
        refuse_unacceptable([case.attachment], settings, case.models)
        return
    with pytest.raises(InvalidRequest) as info:
        refuse_unacceptable([case.attachment], settings, case.models)
    assert str(info.value) == case.message
    assert (info.value.param, info.value.code) == (case.attachment.where, "unsupported_attachment_type")


def test_attachment_infos_are_the_policy_steps_fields() -> None:
    found = inspect_attachments(messages(file(DOCX, "contract.pdf"), image("https://x.invalid/a.png")), SETTINGS)
    infos = attachment_infos(found)
    assert [AttachmentInfo.model_validate(i) for i in infos] == [
        AttachmentInfo(message=1, part=1, declared="pdf", detected="docx", bytes=len(DOCX), mismatch=True),
        AttachmentInfo(message=1, part=2, declared="png", detected=None, bytes=0),
    ]


def test_analysis_carries_the_attachments_and_their_types() -> None:
    body = {"model": "auto", "messages": messages(file(DOCX, "contract.pdf"), image(data_url("image/png", png())),
                                                  file(b"notes", "n.txt"))}
    a = analyse_request(body)
    assert a.features.has_attachments and a.features.file_types == ["docx", "png", "txt"]
    assert [(x.part, x.detected) for x in a.attachments] == [(1, "docx"), (2, "png"), (3, None)]
    assert a.query_text == "summarise this"
    plain = analyse_request({"messages": [{"role": "user", "content": "hello"}]})
    assert plain.attachments == () and plain.features.file_types == []


def test_analysis_refuses_a_malformed_attachment_with_its_param() -> None:
    body = {"messages": messages(image("data:image/png;base64,%%%%"))}
    with pytest.raises(InvalidRequest) as info:
        analyse_request(body, attachments=SETTINGS)
    assert info.value.param == "messages[1].content[1].image_url.url"
    with pytest.raises(InvalidRequest) as info:
        analyse_request({"messages": messages(file(PDF, "a.pdf"))}, attachments=AttachmentSettings(max_bytes=10))
    assert info.value.code == "attachment_too_large"


def test_a_declared_type_is_a_known_type_name_or_unknown_never_the_clients_text() -> None:
    """A file name, a URL path, a MIME subtype and an audio format are the client's text: only type names pass."""
    secret = "Notes re. John Doe HIV test"
    body = {"messages": messages(file(PDF, secret), file(b"notes", "x.JohnDoeHIV"),
                                 file(filename=f"{secret}", file_id="file-1"),
                                 image(f"https://example.com/scans/{secret.replace(' ', '%20')}"),
                                 file(PDF, as_url="application/x-johndoe-hiv"), audio(WAV, "johndoe"),
                                 file(b"print(1)", "job.py"), file(filename="old.JPEG", file_id="file-2"))}
    a = analyse_request(body)
    kept = [AttachmentInfo.model_validate(x) for x in attachment_infos(a.attachments)]  # what the trace keeps
    assert [x.declared for x in kept] == ["unknown"] * 6 + ["py", "jpg"]
    assert a.features.file_types == ["pdf", "unknown", "unknown", "unknown", "pdf", "wav", "py", "jpg"]
    assert not any("john" in str(x).lower() or "hiv" in str(x).lower()
                   for x in [*kept, *a.features.file_types])


def test_every_type_filetype_detects_is_a_named_type() -> None:
    """NAMED_TYPES (schemas: no filetype there) holds every type the bytes can show, a MIME type or an alias names."""
    assert attachments_mod._DETECTABLE <= NAMED_TYPES
    assert set(attachments_mod._BY_MIME.values()) | set(TYPE_ALIASES.values()) | set(attachments_mod._LABELS) \
        <= NAMED_TYPES
