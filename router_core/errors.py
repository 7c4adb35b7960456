"""Errors of the router and the gateway.

::

    RoutelensError                      (schemas/errors.py)
    ├── ConfigError(ValueError)         (schemas/errors.py) names file, line and field
    │   └── PluginError                 a plugin spec is wrong; names the plugin's ``name/type``
    │       ├── UnknownPluginType       no factory registered for the type
    │       ├── PluginConfigError       its parameters do not validate
    │       └── ProfileError            a scorer without a weight, a second picker, a duplicate name
    │   └── PolicyError                 a routing policy does not load; names file, line and column
    ├── DuplicatePluginType             a type registered twice (a programming error)
    ├── InvalidRequest                  the client's request is malformed -> OpenAI-style 400
    │   └── UnknownModel                no instance serves the requested model -> 404
    └── RoutingError                    the request could not be routed or served
        ├── NoFeasibleInstance          nothing feasible and ``on_empty: reject`` -> 503
        ├── Throttled                   a rule's token bucket is empty (overflow: reject) -> 429
        └── AttemptsExhausted           every attempt failed -> 502

The gateway maps them to HTTP in one table (``router_core/gateway/errors.py``).
"""

from __future__ import annotations

from schemas.errors import ConfigError, RoutelensError
from schemas.yamlconf import field_name, locate

__all__ = [
    "AttemptsExhausted",
    "DuplicatePluginType",
    "InvalidRequest",
    "NoFeasibleInstance",
    "PluginConfigError",
    "PluginError",
    "PolicyError",
    "ProfileError",
    "RoutingError",
    "Throttled",
    "UnknownModel",
    "UnknownPluginType",
    "UnsupportedEncoding",
]

Loc = tuple[int | str, ...]


class PluginError(ConfigError):
    """A plugin of the configuration cannot be built.

    Attributes:
        typed_name: The plugin's ``name/type`` as written (``<default>`` when unnamed).
        located: ``(location in the config, message)`` per problem, for :meth:`at`.
    """

    def __init__(self, typed_name: str, located: list[tuple[Loc, str]], source: str = "<config>",
                 text: str | None = None) -> None:
        self.typed_name = typed_name
        self.located = located
        super().__init__(source, [(None if text is None else locate(text, loc), f"{field_name(loc)} ({typed_name})",
                                   msg) for loc, msg in located])

    def at(self, source: str, text: str) -> PluginError:
        """Return the same error naming ``source`` and the lines of ``text`` (the YAML it came from)."""
        return type(self)(self.typed_name, self.located, source, text)


class PolicyError(ConfigError):
    """A routing policy (matrix, DSL, condition) that does not load.

    Attributes:
        located: ``(line, column, message)`` per problem, 1-based; printed ``FILE:LINE:COL: message``.
    """

    def __init__(self, source: str, located: list[tuple[int, int, str]]) -> None:
        self.located = located
        super().__init__(source, [(line, f"column {col}", msg) for line, col, msg in located])
        self.args = ("\n".join(f"{source}:{line}:{col}: {msg}" for line, col, msg in located),)

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownPluginType(PluginError):
    """The spec names a type no factory is registered for."""


class PluginConfigError(PluginError):
    """The plugin's parameters failed its ``Params`` validation."""


class ProfileError(PluginError):
    """The plugin list is inconsistent: a weightless scorer, a second picker, a name used twice."""


class DuplicatePluginType(RoutelensError):
    """A plugin type was registered twice in one registry."""


class InvalidRequest(RoutelensError):
    """A request that breaks the OpenAI chat-completions contract.

    Attributes:
        param: The offending request field, as OpenAI's ``error.param``.
        code: A short machine-readable code.
    """

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


class UnsupportedEncoding(InvalidRequest):
    """A request body sent compressed (``Content-Encoding``), which the gateway does not inflate."""


class UnknownModel(InvalidRequest):
    """The requested model is not served by any instance of the fleet."""


class RoutingError(RoutelensError):
    """The request could not be routed or served; the trace is recorded before this reaches the client."""


class NoFeasibleInstance(RoutingError):
    """No candidate was feasible and the policy says reject (``router.on_empty: reject``)."""


class AttemptsExhausted(RoutingError):
    """Every instance tried failed (connection errors, timeouts, 429 or 5xx).

    Attributes:
        last_error: The error class of the last attempt.
        retry: Whether a client's retry is worth it (False when every attempt ran out of its time:
            a retry would wait as long again, on every instance again).
    """

    def __init__(self, message: str, *, last_error: str | None, retry: bool = True) -> None:
        super().__init__(message)
        self.last_error = last_error
        self.retry = retry


class Throttled(RoutingError):
    """A routing rule's throttle refused the request (``throttle_config.overflow: reject``, or a wait too long).

    Attributes:
        retry_after_s: When a token will be there; sent as ``Retry-After``.
    """

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
