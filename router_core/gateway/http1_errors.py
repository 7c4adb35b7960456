"""The upstream HTTP/1.1 client's failures, named as aiohttp names them (the attempt's ``error_class``).

```
UpstreamError
├── ClientConnectorError        the connection could not be opened
├── ServerDisconnectedError     closed before the answer's head
├── ClientPayloadError          closed (or broke) inside the body
└── ClientResponseError         the answer is not valid HTTP/1.1
```

Import them from :mod:`router_core.gateway.http1`, which hands them on.
"""

from __future__ import annotations

__all__ = [
    "ClientConnectorError",
    "ClientPayloadError",
    "ClientResponseError",
    "ServerDisconnectedError",
    "UpstreamError",
]


class UpstreamError(Exception):
    """Root of the upstream client's failures."""


class ClientConnectorError(UpstreamError):
    """The connection could not be opened."""


class ServerDisconnectedError(UpstreamError):
    """The connection closed before the answer's head arrived."""


class ClientPayloadError(UpstreamError):
    """The connection closed (or broke) inside the answer's body."""


class ClientResponseError(UpstreamError):
    """The answer is not valid HTTP/1.1."""
