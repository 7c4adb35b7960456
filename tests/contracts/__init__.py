"""External contracts the tests check the project against, vendored so a bare clone tests everything.

``SOURCES.md`` beside this file names each file's origin and licence. A test that needs a contract
calls :func:`contract`; a missing file is an error (the clone is broken), never a skip.
"""

from __future__ import annotations

from pathlib import Path

CONTRACTS = Path(__file__).resolve().parent


def contract(*parts: str) -> Path:
    """Return the path of a vendored contract file or folder; raise when it is absent."""
    path = CONTRACTS.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"vendored contract missing: {path} (see tests/contracts/SOURCES.md)")
    return path
