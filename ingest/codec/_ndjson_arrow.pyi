"""Our own JSON records into Arrow buffers (C, outside the GIL); see ingest/codec/fast_decoder.py."""

BOOL: int
INT64: int
DOUBLE: int
STRING: int
TIMESTAMP: int
STRUCT: int
LIST: int
MAX_FIELDS: int  # of one struct
REQUIRED: int  # a node flag: its key must be present
NOT_NULL: int  # a node flag: its value may not be null

def decode(
    spec: tuple[int, bytes, tuple[object, ...]] | tuple[int, bytes, tuple[object, ...], int], payloads: list[bytes], /,
) -> list[tuple[int, int, tuple[int, int, object] | None, tuple[int, int, object] | None,
                tuple[int, int, object] | None]] | None: ...
