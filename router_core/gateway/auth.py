"""Who may call the gateway, and which credentials go upstream.

Gateway keys: ``gateway.api_keys_env`` names an environment variable holding comma-separated keys;
every gateway route but ``/health`` and ``/metrics`` then requires ``Authorization: Bearer <key>``
(401 in OpenAI's shape otherwise); a GET takes the store's read token too. Unset, the gateway is
open, which :func:`open_notice` allows only on a loopback address. The store's query API, mounted
on the same application by ``app``, guards itself with its own tokens (``storage.read_token_env``,
``storage.intake_token_env``).

Upstream keys: each instance's ``api_key_env`` is sent as ``Authorization: Bearer``. With
``gateway.forward_authorization`` the client's own ``Authorization`` header goes upstream instead
(the instance key when the client sent none); the gateway's key check still applies, so configure
``api_keys_env`` with the keys the upstreams accept, or leave it unset on loopback.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

from aiohttp import web
from aiohttp.typedefs import Middleware

from router_core.gateway.errors import error_response
from schemas.errors import ConfigError
from schemas.fleet import InstanceSpec

__all__ = ["bearer_ok", "is_loopback", "key_middleware", "keys_from_env", "open_notice", "upstream_keys"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _env_error(setting: str, message: str) -> ConfigError:
    return ConfigError("<environment>", [(None, setting, message)])


def keys_from_env(env_name: str | None, environ: Mapping[str, str], setting: str) -> frozenset[str] | None:
    """The comma-separated keys in the variable ``env_name``; None when no variable is named.

    Raises:
        ConfigError: A variable is named but unset or empty (failing closed, at startup).
    """
    if env_name is None:
        return None
    keys = frozenset(k.strip() for k in environ.get(env_name, "").split(",") if k.strip())
    if not keys:
        raise _env_error(setting, f"names the environment variable {env_name}, which is unset or empty")
    return keys


def upstream_keys(instances: Sequence[InstanceSpec], environ: Mapping[str, str]) -> dict[str, str]:
    """Instance id -> the key its ``api_key_env`` names (instances without one are left out).

    Raises:
        ConfigError: A named variable is unset or empty.
    """
    out: dict[str, str] = {}
    for i, spec in enumerate(instances):
        if spec.api_key_env is None:
            continue
        key = environ.get(spec.api_key_env, "").strip()
        if not key:
            raise _env_error(f"fleet.instances[{i}].api_key_env",
                             f"names the environment variable {spec.api_key_env}, which is unset or empty")
        out[spec.id] = key
    return out


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def open_notice(host: str, keys: Collection[str] | None, *, what: str, setting: str) -> str | None:
    """The notice to print when ``what`` is open (no keys) on loopback; None when keys guard it.

    Raises:
        ConfigError: No keys and ``host`` is not loopback: refusing to serve an open API.
    """
    if keys:
        return None
    if not is_loopback(host):
        raise _env_error(setting, f"unset, and {host} is not a loopback address: set it to serve {what} there")
    return f"{what} is open (no {setting}): bound to loopback {host} only"


def bearer_ok(header: str | None, keys: Collection[str]) -> bool:
    """Whether ``header`` is ``Bearer <one of keys>`` (each compared in constant time)."""
    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        return False
    given = token.strip().encode()
    return any([hmac.compare_digest(given, k.encode()) for k in keys])  # a list: every key is compared


def key_middleware(
    keys: Collection[str], is_guarded: Callable[[web.Request], bool], *, read_keys: Collection[str] = ()
) -> Middleware:
    """An aiohttp middleware answering 401 ``invalid_api_key`` to guarded requests without a valid key.

    ``read_keys`` (the store's read token) are taken too on a guarded GET: the app reads the live
    views (``/v1/router/state``, ``/v1/alerts``) with the token it reads the traces with.
    """

    def allowed(request: web.Request) -> bool:
        header = request.headers.get("Authorization")
        return bearer_ok(header, keys) or (request.method == "GET" and bool(read_keys)
                                           and bearer_ok(header, read_keys))

    @web.middleware
    async def check_key(request: web.Request, handler: Handler) -> web.StreamResponse:
        if is_guarded(request) and not allowed(request):
            return error_response(401, "Incorrect API key provided: send 'Authorization: Bearer <key>' with a "
                                  "key the gateway accepts", code="invalid_api_key",
                                  headers={"WWW-Authenticate": "Bearer"})
        return await handler(request)

    return check_key
