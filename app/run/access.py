"""Who may call a served RouteLens: each HTTP surface's key or token, checked at start.

An API without a key is open, which is allowed only on a loopback address: then the server says
so once at start; on any other address it refuses to start, before it binds or opens anything,
naming what to set. Every process that listens checks the surfaces it serves:

- ``serve`` (:func:`access_notices`): the gateway (``gateway.api_keys_env``), the store's query
  API (``storage.read_token_env``) and trace intake ``POST /v1/traces``
  (``storage.intake_token_env``). The gateway's key guards only the gateway's own routes: the
  store's routes on the same port take their own tokens, so a keyed gateway with no intake
  token would take anyone's traces.
- ``routelens store`` (:func:`store_notices`): the query API, the intake, and the relay route
  ``POST /v1/internal/records`` (:data:`~app.run.storage.RELAY_TOKEN_ENV`).
- ``routelens probes run`` (:func:`prober_notices`): its verdicts, alerts and stats
  (``storage.read_token_env``: the token the gateways following it send), and, when it owns the
  store, the query API and the intake.

``/health``, ``/metrics`` and ``/openapi.json`` are open everywhere, as on the gateway.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence

from app.run.storage import RELAY_TOKEN_ENV
from router_core import keys_from_env, open_notice
from schemas.config import RouteLensConfig
from schemas.config.storage import StorageSettings
from schemas.errors import ConfigError

__all__ = ["AccessRefused", "access_notices", "hash_key_of", "intake_token_of", "prober_notices", "read_token_of",
           "relay_token_of", "store_notices"]

# (what is served, the setting or variable that guards it, its keys: None when open)
_Surface = tuple[str, str, Callable[[], Collection[str] | None]]


class AccessRefused(ConfigError):
    """A server that would be open off loopback, or names a token variable that is unset.

    A :class:`ConfigError` (the command line's exit 2) that prints as one line, every problem
    joined: there is no file or line to point at, and each names what to set.
    """

    def __str__(self) -> str:
        return "; ".join(f"{field}: {message}" for _, field, message in self.problems)


def _token(st: StorageSettings, setting: str, environ: Mapping[str, str] | None) -> str | None:
    name: str | None = getattr(st, setting)
    if name is None:
        return None
    token = (os.environ if environ is None else environ).get(name, "").strip()
    if not token:  # named but unset: failing closed, at startup, not serving open
        raise ConfigError("<environment>", [(None, f"storage.{setting}",
                                             f"names the environment variable {name}, which is unset or empty")])
    return token


def read_token_of(st: StorageSettings, environ: Mapping[str, str] | None = None) -> str | None:
    """The store's read token from the variable ``storage.read_token_env`` names (None: none named).

    Raises:
        ConfigError: The variable is named but unset or empty.
    """
    return _token(st, "read_token_env", environ)


def intake_token_of(st: StorageSettings, environ: Mapping[str, str] | None = None) -> str | None:
    """The intake's token from the variable ``storage.intake_token_env`` names (None: none named).

    Raises:
        ConfigError: The variable is named but unset or empty.
    """
    return _token(st, "intake_token_env", environ)


def hash_key_of(config: RouteLensConfig | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The HMAC key of query hashes and withheld values' fingerprints: ``router.hash_key_env``'s value, if set."""
    name = None if config is None else config.router.hash_key_env
    return (os.environ if environ is None else environ).get(name) if name else None


def relay_token_of(environ: Mapping[str, str] | None = None) -> str | None:
    """The relay route's token, :data:`~app.run.storage.RELAY_TOKEN_ENV` (None: unset, the route is open).

    As it is set, not stripped: the gateways and the prober send the variable's value as it is.
    """
    token = (os.environ if environ is None else environ).get(RELAY_TOKEN_ENV, "")
    return token if token.strip() else None


def _one(token: str | None) -> list[str] | None:
    return [token] if token else None


def _checked(host: str, surfaces: Sequence[_Surface]) -> list[str]:
    """The notices of the open ``surfaces`` on loopback ``host``; every problem at once otherwise."""
    notices: list[str] = []
    problems: list[tuple[int | None, str, str]] = []
    for what, setting, keys in surfaces:
        try:
            notice = open_notice(host, keys(), what=what, setting=setting)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        if notice:
            notices.append(notice)
    if problems:
        raise AccessRefused("<environment>", problems)
    return notices


def _store_surfaces(st: StorageSettings, env: Mapping[str, str], query_api: str) -> list[_Surface]:
    return [(query_api, "storage.read_token_env", lambda: _one(read_token_of(st, env))),
            ("trace intake (POST /v1/traces)", "storage.intake_token_env", lambda: _one(intake_token_of(st, env)))]


def access_notices(config: RouteLensConfig, host: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """``serve``'s notices: the gateway, the store's query API or the intake open on the loopback ``host``.

    Raises:
        AccessRefused: One would be open on an address other than loopback, or a named variable is unset.
    """
    env = os.environ if environ is None else environ
    return _checked(host, [
        ("the gateway", "gateway.api_keys_env",
         lambda: keys_from_env(config.gateway.api_keys_env, env, "gateway.api_keys_env")),
        *_store_surfaces(config.storage, env, "the store's query API"),
    ])


def store_notices(config: RouteLensConfig, host: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """``routelens store``'s notices: its query API, intake or relay route open on the loopback ``host``.

    Raises:
        AccessRefused: One would be open on an address other than loopback, or a named variable is unset.
    """
    env = os.environ if environ is None else environ
    return _checked(host, [
        *_store_surfaces(config.storage, env, "the store's query API"),
        ("the relay route (POST /v1/internal/records)", RELAY_TOKEN_ENV, lambda: _one(relay_token_of(env))),
    ])


def prober_notices(config: RouteLensConfig, host: str, *, owns_store: bool,
                   environ: Mapping[str, str] | None = None) -> list[str]:
    """``routelens probes run``'s notices: its API (and the store's, when ``owns_store``) open on loopback.

    Raises:
        AccessRefused: One would be open on an address other than loopback, or a named variable is unset.
    """
    env = os.environ if environ is None else environ
    if not owns_store:  # it relays to a store elsewhere and serves no store route
        return _checked(host, [("the prober's API (verdicts, alerts, stats)", "storage.read_token_env",
                                lambda: _one(read_token_of(config.storage, env)))])
    return _checked(host, _store_surfaces(config.storage, env, "the prober's API (verdicts, alerts, stats, "
                                                               "and the store's queries)"))
