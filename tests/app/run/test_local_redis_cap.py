"""The local Redis ``serve --workers N`` starts is capped, and evicts only keys with a TTL (the verdict claims).

Before, it ran without ``--maxmemory``: the feedback claims (one key per verdict, 7 days each) grew
without bound, 10 GB a week at 100 verdicts a second.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from app.run.local_redis import SOCKET_NAME, start_local_redis
from tests.redis_server import requires_redis

pytestmark = requires_redis


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder whose socket path fits in a Unix socket's address (pytest's can be too long)."""
    folder = Path(tempfile.mkdtemp(prefix="rl-redis-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_started_server_reports_its_memory_cap_and_volatile_lru(short_dir: Path) -> None:
    child, url = start_local_redis(short_dir)
    assert child is not None, url
    try:
        assert url == f"unix://{short_dir.resolve() / SOCKET_NAME}"
        client = redis.Redis(unix_socket_path=str(short_dir.resolve() / SOCKET_NAME), socket_timeout=5)
        try:
            assert client.config_get("maxmemory") == {"maxmemory": str(256 * 1024 * 1024)}
            assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "volatile-lru"}
        finally:
            client.close()
    finally:
        child.stop()
