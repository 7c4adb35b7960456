"""Which arm serves a request: MurmurHash of a configured key onto cumulative share ranges.

The key (request id, a header such as ``x-user-id``, the session, or a ``metadata`` entry) hashes
to a bucket in [0, 1); arms own consecutive ranges of it in declaration order, each as wide as its
share. A user therefore stays in one arm, and a change of shares moves only the keys whose bucket
lies between an old and a new boundary: every other key keeps its arm. A forcing header names the
arm outright (testing, "traffic dyeing").
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mmh3

from router_core.errors import InvalidRequest
from router_core.wire_bytes import wire_bytes
from schemas.config.experiments import ExperimentsSettings

__all__ = ["ARM_SEED", "SESSION_HEADER", "Assigner", "Assignment", "bucket"]

ARM_SEED = 0x5EED_A2B1  # the arm hash is salted: it must not correlate with the pickers' mmh3(request_id)
SESSION_HEADER = "x-session-id"
_SPAN = float(1 << 32)


def bucket(key: str, seed: int = ARM_SEED) -> float:
    """The key's place in [0, 1): 32-bit MurmurHash3 (unsigned) of its bytes, over 2**32.

    Its bytes, not the string: mmh3 hashes a string's UTF-8 bytes (the same buckets), but crashed
    the process on a header byte that is not UTF-8 (see :mod:`router_core.wire_bytes`).
    """
    return mmh3.hash(wire_bytes(key), seed, signed=False) / _SPAN


@dataclass(frozen=True, slots=True)
class Assignment:
    """The arm a request is served by, the key it was assigned from, and whether a header forced it."""

    arm: str
    key: str
    forced: bool = False


class Assigner:
    """Assigns requests to the arms of an ``experiments:`` section.

    Args:
        settings: The arms in declaration order with their shares, the key and the forcing header.
    """

    def __init__(self, settings: ExperimentsSettings) -> None:
        self.settings = settings
        self.names = settings.arm_names
        # Upper bound of each arm's range; the last is 1.0 exactly whatever the float sum says.
        bounds = list(itertools.accumulate(a.share for a in settings.arms))
        bounds[-1] = 1.0
        self._bounds = bounds
        self._known = set(self.names)

    def arm_of(self, key: str) -> str:
        """The arm whose range holds ``key``'s bucket (zero-share arms own empty ranges)."""
        return self.names[self._index(bucket(key))]

    def _index(self, b: float) -> int:
        i = bisect.bisect_right(self._bounds, b)
        return min(i, len(self.names) - 1)

    def key_of(self, request_id: str, headers: Mapping[str, str], body: Any) -> str:
        """The assignment key of one request; its request id when the configured key is absent."""
        kind, _, name = self.settings.key.partition(":")
        value: Any = None
        if kind == "header":
            value = headers.get(name)
        elif kind == "session":
            value = headers.get(SESSION_HEADER) or (body.get("user") if isinstance(body, dict) else None)
        elif kind == "metadata" and isinstance(body, dict) and isinstance(meta := body.get("metadata"), dict):
            value = meta.get(name)
        return str(value) if value not in (None, "") else request_id

    def assign(self, request_id: str, headers: Mapping[str, str], body: Any) -> Assignment:
        """The arm of one request: the forcing header's when present, else the key's bucket.

        Raises:
            InvalidRequest: The forcing header names no arm (the gateway answers 400).
        """
        forced = headers.get(self.settings.force_header)
        if forced:
            if forced not in self._known:
                raise InvalidRequest(
                    f"{self.settings.force_header} names no experiment arm: {forced[:64]!r} "
                    f"(arms: {', '.join(self.names)})", param=self.settings.force_header, code="unknown_arm")
            return Assignment(forced, request_id, forced=True)
        key = self.key_of(request_id, headers, body)
        return Assignment(self.arm_of(key), key)
