"""Who may call a served RouteLens: the gateway's keys and the store's read token, checked at start.

An API without a key is open, which is allowed only on a loopback address: then the server says
so once at start (:func:`access_notices`); on any other address it refuses to start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from router_core import keys_from_env, open_notice
from schemas.config import RouteLensConfig
from schemas.config.storage import StorageSettings
from schemas.errors import ConfigError

__all__ = ["access_notices", "read_token_of"]


def read_token_of(st: StorageSettings, environ: Mapping[str, str] | None = None) -> str | None:
    """The store's read token from the variable ``storage.read_token_env`` names (None: none named).

    Raises:
        ConfigError: The variable is named but unset or empty.
    """
    if st.read_token_env is None:
        return None
    token = (os.environ if environ is None else environ).get(st.read_token_env, "").strip()
    if not token:
        message = f"names the environment variable {st.read_token_env}, which is unset or empty"
        raise ConfigError("<environment>", [(None, "storage.read_token_env", message)])
    return token


def access_notices(config: RouteLensConfig, host: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """The notices that the gateway or the store's query API is open (no keys) on the loopback ``host``.

    Raises:
        ConfigError: Either would be open on an address other than loopback, or a named variable is unset.
    """
    env = os.environ if environ is None else environ
    gateway_keys = keys_from_env(config.gateway.api_keys_env, env, "gateway.api_keys_env")
    read_token = read_token_of(config.storage, env)
    notices = [
        open_notice(host, gateway_keys, what="the gateway", setting="gateway.api_keys_env"),
        open_notice(host, [read_token] if read_token else None, what="the store's query API",
                    setting="storage.read_token_env"),
    ]
    return [n for n in notices if n]
