"""Messages kept in Redis as a channel's state (open breakers), for replicas that start or reconnect later.

A message published with ``keep`` is also written, in the flush that publishes it, as the field
``key`` of the channel's hash ``kept:<channel>``, with its expiry on Redis's clock (deleted when
``keep_s`` is 0). A replica that starts, or reconnects after an outage (it missed the publications
meanwhile), reads the channels it has handlers for, one round trip, and hands each message to them
with ``age_s``: the seconds since it was kept (from its TTL, so no two clocks are compared).

This replica remembers its own kept messages. What it kept while Redis was down (or in a flush that
failed) is written at the next connection, the latest per key; when the server is a new one
(restarted, empty), every one still alive is written again, unless another replica's is there first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from redis.asyncio.client import Pipeline

from router_core.shared.redis_store import RedisStore

__all__ = ["KeptMessages"]


class KeptMessages:
    """This replica's kept messages (to write again), and the reading of every replica's.

    Args:
        store: The connection.
        clock: Monotonic seconds (the remaining TTL of this replica's own).
    """

    def __init__(self, store: RedisStore, clock: Callable[[], float]) -> None:
        self.store, self._clock = store, clock
        # (channel, key) -> (message or None: no state any more, ttl ms, expires at)
        self._mine: dict[tuple[str, str], tuple[dict[str, Any] | None, int, float]] = {}
        self._owed: set[tuple[str, str]] = set()  # not written: Redis was down, or the flush failed

    def note(self, channel: str, key: str, message: dict[str, Any], keep_s: float, *, owed: bool = False) -> int:
        """Remember this replica's latest for ``(channel, key)`` (``owed``: not sent); its TTL in ms (0: none)."""
        now = self._clock()
        ms = max(1, math.ceil(keep_s * 1e3)) if keep_s > 0 else 0
        for ck in [ck for ck, (_, _, expires) in self._mine.items() if expires <= now and ck not in self._owed]:
            del self._mine[ck]  # one entry per key ever kept at most: this stays small
        self._mine[(channel, key)] = (message if ms else None, ms, now + ms / 1e3)
        if owed:
            self._owed.add((channel, key))
        return ms

    def owe(self, keys: Iterable[tuple[str, str]]) -> None:
        """The writes of these ``(channel, key)`` did not reach Redis: they go at the next connection."""
        self._owed.update(keys)

    async def sync(self, new_server: bool, channels: Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
        """Write what is owed (and, on a new server, every one alive), then read the other replicas' of ``channels``."""
        now, rows = self._clock(), []
        for ck, (message, ms, expires) in self._mine.items():
            left = math.ceil((expires - now) * 1e3)
            if ck in self._owed and (message is None or left > 0):
                rows.append((ck, message, ms, left, False))
            elif new_server and message is not None and left > 0:
                rows.append((ck, message, ms, left, True))

        def write(pipe: Pipeline) -> None:
            for (channel, key), message, ms, left, nx in rows:
                self.store.keep(pipe, channel, key, message, ms, left_ms=left, nx=nx)

        if rows and await self.store.run(write, anyway=True) is None:
            raise ConnectionError("kept messages not written")
        self._owed.clear()
        names = sorted(set(channels))

        def read(pipe: Pipeline) -> None:
            for channel in names:
                self.store.kept(pipe, channel)

        res = await self.store.run(read, anyway=True) if names else []
        if res is None:
            raise ConnectionError("kept messages not read")
        out = []
        for channel, flat in zip(names, res, strict=True):
            for _, raw, left_ms in zip(flat[::3], flat[1::3], flat[2::3], strict=True):
                got = _parsed(raw)
                if got is not None and got.get("from") != self.store.replica_id:  # its own: applied when sent
                    age_s = max(0.0, (int(got.get("ttl_ms") or 0) - int(left_ms)) / 1e3)
                    out.append((channel, {**got["message"], "age_s": age_s}))
        return out


def _parsed(raw: Any) -> dict[str, Any] | None:
    """A kept value's ``{from, message, ttl_ms}``; None when it is not one."""
    try:
        got = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return got if isinstance(got, dict) and isinstance(got.get("message"), dict) else None
