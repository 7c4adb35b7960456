"""Errors of the router and the gateway.

::

    RoutelensError                  (schemas/errors.py)
    ├── InvalidRequest              the client's request is malformed -> OpenAI-style 400
    │   └── UnknownModel            no instance serves the requested model -> 404
    └── RoutingError                no instance could serve the request -> 503
"""

from __future__ import annotations

from schemas.errors import RoutelensError

__all__ = ["InvalidRequest", "RoutingError", "UnknownModel"]


class InvalidRequest(RoutelensError):
    """A request that breaks the OpenAI chat-completions contract.

    Attributes:
        param: The offending request field, as OpenAI's ``error.param``.
        code: A short machine-readable code.
    """

    status = 400

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


class UnknownModel(InvalidRequest):
    """The requested model is not served by any instance of the fleet."""

    status = 404


class RoutingError(RoutelensError):
    """No instance could serve the request."""
