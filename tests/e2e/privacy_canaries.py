"""Canary texts and where to look for them: the byte forms a leak may take, and the places a run leaves behind.

A query's text may leave a process as it was sent, lower-cased or NFKC-folded (what ``query_hash``
normalises), JSON-escaped (``\\u7434``), URL-encoded, as UTF-16, or cut short: each canary is looked
for word by word in each of those forms, case-insensitively (:class:`Canary`). The ``*_blobs``
functions gather what a run left behind, as ``{place: bytes}``; :func:`findings` answers
``(place, form, excerpt)`` so that an assertion names where a canary was found.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb

__all__ = ["CANARY_EN", "CANARY_EN_WIDE", "CANARY_NAME", "CANARY_ZH", "Canary", "Finding", "duckdb_blobs",
           "file_blobs", "findings", "redis_blobs", "report", "temp_blobs"]

CANARY_EN = "Quorvex Thimbleflax"  # words found nowhere else in the repository
CANARY_EN_WIDE = "Ｑｕｏｒｖｅｘ Ｔｈｉｍｂｌｅｆｌａｘ"  # the same, full-width: NFKC folds it to CANARY_EN
CANARY_ZH = "蜃楼琉璃笺"
CANARY_NAME = "Glimmerwold 漩涡翡翠"  # what a client writes in an attachment's name, URL or media type
Finding = tuple[str, str, str]  # (place, form, excerpt)


class Canary:
    """The byte forms of some canary words (lower-cased: the haystack is lower-cased too), each with a name."""

    def __init__(self, words: Iterable[str]) -> None:
        self.forms: dict[bytes, str] = {}
        for word in words:
            for text in {word, unicodedata.normalize("NFKC", word)}:
                for variant in {text, text.lower(), text.upper()}:
                    for name, data in (("utf-8", variant.encode()), ("json-escaped", json.dumps(variant)[1:-1]),
                                       ("url-encoded", urllib.parse.quote(variant)),
                                       ("utf-16", variant.encode("utf-16-le"))):
                        raw = data if isinstance(data, bytes) else data.encode()
                        self.forms.setdefault(raw.lower(), f"{name} {variant!r}")

    def find(self, place: str, data: bytes) -> list[Finding]:
        """Every form in ``data``, once per form, with 60 bytes either side of its first hit."""
        hay = data.lower()
        found = []
        for needle, form in self.forms.items():
            if (at := hay.find(needle)) >= 0:
                excerpt = data[max(0, at - 60): at + len(needle) + 60].decode("utf-8", "replace")
                found.append((place, form, excerpt))
        return found


def findings(canary: Canary, blobs: Mapping[str, bytes]) -> list[Finding]:
    """Every place of ``blobs`` holding a form of ``canary``."""
    return [f for place, data in blobs.items() for f in canary.find(place, data)]


def file_blobs(folder: Path, label: str) -> dict[str, bytes]:
    """Every file under ``folder``, byte for byte (sockets and other special files skipped)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            try:
                out[f"{label}: file {path.relative_to(folder)}"] = path.read_bytes()
            except OSError:  # removed meanwhile (a spool segment recycled, a temporary file)
                continue
    return out


def temp_blobs(since: float, skip: Path, max_bytes: int = 64 << 20) -> dict[str, bytes]:
    """Files changed since ``since`` at the top of the temporary folder and of ``/dev/shm``, where a process's
    own temporary files go (the folders below are other programs'; ``skip``, this run's, is read apart)."""
    out = {}
    for top in {Path(tempfile.gettempdir()), Path("/dev/shm")}:
        for path in top.glob("*") if top.is_dir() else []:
            try:
                st = path.stat()
                if (path.is_file() and not path.is_symlink() and st.st_mtime >= since and st.st_size <= max_bytes
                        and not path.is_relative_to(skip)):
                    out[f"temporary file {path}"] = path.read_bytes()
            except OSError:
                continue
    return out


def _values(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _values(k)
            yield from _values(v)
    elif isinstance(value, list | tuple | set):
        for v in value:
            yield from _values(v)


def duckdb_blobs(db: Path, scratch: Path) -> dict[str, bytes]:
    """Every string (nested ones included) of every table of a copy of ``db``, opened read-only: one blob a table.

    DuckDB compresses its string columns, so a byte scan of the file proves nothing: the rows are read.
    """
    scratch.mkdir()
    shutil.copy(db, scratch / db.name)
    if (wal := db.with_name(db.name + ".wal")).exists():
        shutil.copy(wal, scratch / wal.name)
    con = duckdb.connect(str(scratch / db.name), read_only=True)
    out = {}
    try:
        tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall()
        assert tables, "the trace file holds no table"
        for schema, table in tables:
            rows = con.execute(f'SELECT * FROM "{schema}"."{table}"').fetchall()
            text = "\n".join(s for row in rows for s in _values(list(row)))
            out[f"duckdb table {schema}.{table} ({len(rows)} rows)"] = text.encode()
    finally:
        con.close()
    return out


def redis_blobs(sock: Path) -> dict[str, bytes]:
    """Every key and value of the local Redis ``serve --workers N`` started (strings, hashes, sets, lists, zsets)."""
    import redis

    client = redis.Redis(unix_socket_path=str(sock), decode_responses=False)
    read: dict[str, Callable[[bytes], Any]] = {
        "string": client.get, "hash": client.hgetall, "set": client.smembers,
        "list": lambda k: client.lrange(k, 0, -1), "zset": lambda k: client.zrange(k, 0, -1)}
    out = {}
    try:
        for key in client.scan_iter(count=1000):
            name = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
            kind = client.type(key)
            value = read.get(kind.decode() if isinstance(kind, bytes) else str(kind), lambda _k: b"")(key)
            out[f"redis key {name!r}"] = "\n".join([name, *_values(value)]).encode()
    finally:
        client.close()
    assert out, "the local Redis holds no key: it was not the workers' shared state"
    return out


def report(found: Iterable[Finding], what: str) -> str:
    """One line per place: where, which form, and what surrounds it."""
    by_place: dict[str, list[tuple[str, str]]] = {}
    for place, form, excerpt in found:
        by_place.setdefault(place, []).append((form, excerpt))
    lines = [f"{what} reached {len(by_place)} place(s):"]
    for place, hits in by_place.items():
        form, excerpt = hits[0]
        lines.append(f"- {place}: {form} ({len(hits)} form(s)) ...{excerpt!r}...")
    return "\n".join(lines)
