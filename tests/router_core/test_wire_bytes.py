"""The bytes of a string from the wire: UTF-8 as usual, an undecodable byte as itself, never an exception."""

from __future__ import annotations

from router_core.wire_bytes import wire_bytes


def test_a_valid_string_gives_its_utf8_bytes_and_an_undecodable_byte_gives_itself() -> None:
    assert wire_bytes("user-42") == b"user-42" and wire_bytes("ünï") == "ünï".encode()
    raw = b"t-\xff\xfe\xc3"
    assert wire_bytes(raw.decode("utf-8", "surrogateescape")) == raw  # what aiohttp decoded, back to its bytes
    assert wire_bytes("a\ud800b") == "a\ud800b".encode("utf-8", "surrogatepass")  # any other lone surrogate
