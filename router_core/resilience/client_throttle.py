"""Per-client token buckets and priority shedding (seed 000, 七级防御 #2), before analysis.

What it does: names the client of a request by the first of ``throttles.client.key`` it has (the
``Authorization`` bearer token, a header, the peer address; tokens and header values are hashed,
never stored), and takes a token from that client's bucket; then, with ``throttles.shedding``,
from one bucket every client shares, leaving ``reserve[priority] * burst`` tokens behind: as the
gateway fills up, ``low`` is refused first, then ``normal``, and ``high`` last. Buckets live in the
:class:`SharedState` (Redis: every replica draws on the same ones, through a local lease per
bucket, so a take awaits no round trip). One client emptying its bucket costs the others nothing:
each key is its own bucket (and its own lease).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from router_core.resilience.prefilter import Refusal
from router_core.shared.base import SharedState
from router_core.wire_bytes import wire_bytes
from schemas.config.shared import PRIORITIES, ThrottleSettings

__all__ = ["ClientThrottle", "client_key"]


def _digest(value: str) -> str:
    # its bytes: a header byte that is not UTF-8 made ``value.encode()`` a 500 (router_core.wire_bytes)
    return hashlib.blake2b(wire_bytes(value), digest_size=12).hexdigest()


def client_key(sources: list[str], headers: Mapping[str, str], remote: str | None) -> str:
    """The client's bucket key: the first source the request has (``anonymous`` when none)."""
    for source in sources:
        if source == "authorization":
            auth = headers.get("Authorization", "")
            scheme, _, token = auth.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return "key:" + _digest(token.strip())
        elif source == "address":
            if remote:
                return "addr:" + remote
        else:
            name = source.removeprefix("header:")
            if value := headers.get(name, "").strip():
                return f"hdr:{name}:{_digest(value)}"
    return "anonymous"


class ClientThrottle:
    """The client and shedding buckets of ``throttles``.

    Args:
        settings: ``throttles`` (``client`` and ``shedding`` are read; either may be absent).
        shared: Where the buckets are.
    """

    def __init__(self, settings: ThrottleSettings, shared: SharedState) -> None:
        self.settings = settings
        self.shared = shared

    async def admit(self, headers: Mapping[str, str], remote: str | None) -> Refusal | None:
        """Take this request's tokens; the 429 refusal when a bucket is empty."""
        client = self.settings.client
        if client is not None:
            key = client_key(client.key, headers, remote)
            taken, wait = await self.shared.take("client:" + key, client.rate, client.burst)
            if not taken:
                return Refusal(429, f"too many requests from this client (rate {client.rate:g}/s, burst "
                                    f"{client.burst:g}); retry in {wait:.2f} s", "client_rate_limited",
                               retry_after_s=wait)
        shed = self.settings.shedding
        if shed is not None:
            priority = headers.get(shed.priority_header, "normal").strip().lower()
            if priority not in PRIORITIES:
                priority = "normal"
            floor = shed.reserve[priority] * shed.burst  # type: ignore[index]
            taken, wait = await self.shared.take("shedding", shed.rate, shed.burst, floor=floor)
            if not taken:
                return Refusal(429, f"the gateway is shedding {priority}-priority requests under load; "
                                    f"retry in {wait:.2f} s", f"shed_{priority}", retry_after_s=wait)
        return None
