"""The bytes a string from the wire came from: what the gateway hashes, so no request value can crash it.

aiohttp decodes header bytes as UTF-8 with ``surrogateescape``: a byte that is not UTF-8 becomes a
lone surrogate (U+DC80-U+DCFF), and such a string has no strict UTF-8 encoding. Hashing the string
itself failed (``str.encode()``: a 500) or crashed the process (mmh3 5.3.1 dereferences NULL on it).
``errors_middleware`` refuses these headers before any route runs; the hashes take bytes anyway, so
a value that comes in some other way is hashed, not fatal.
"""

from __future__ import annotations

__all__ = ["wire_bytes"]


def wire_bytes(text: str) -> bytes:
    """``text``'s UTF-8 bytes, an undecodable byte as itself; never raises.

    For every string that is valid UTF-8 these are its ordinary UTF-8 bytes (so a hash of them is
    the hash of the string as before). A lone surrogate aiohttp did not make (U+D800-U+DC7F) gives
    its ``surrogatepass`` bytes.
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
