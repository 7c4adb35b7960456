"""``routelens serve`` at start: an open gateway or query API is allowed on loopback only, and said so."""

from __future__ import annotations

import pytest

from app.run.access import access_notices, read_token_of
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError

FLEET = {"fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]}}
KEYED = FLEET | {"gateway": {"api_keys_env": "GW_KEYS"},
                 "storage": {"read_token_env": "READ_T", "intake_token_env": "INTAKE_T"}}


def test_open_on_loopback_is_allowed_with_one_notice_each() -> None:
    notices = access_notices(RouteLensConfig.model_validate(FLEET), "127.0.0.1", {})
    assert len(notices) == 3 and "gateway.api_keys_env" in notices[0] and "storage.read_token_env" in notices[1]
    assert "POST /v1/traces" in notices[2] and "storage.intake_token_env" in notices[2]


def test_open_elsewhere_is_refused_and_keys_make_it_quiet() -> None:
    with pytest.raises(ConfigError, match="0.0.0.0 is not a loopback address"):
        access_notices(RouteLensConfig.model_validate(FLEET), "0.0.0.0", {})
    keyed = RouteLensConfig.model_validate(KEYED)
    assert access_notices(keyed, "0.0.0.0", {"GW_KEYS": "k1,k2", "READ_T": "r", "INTAKE_T": "i"}) == []
    with pytest.raises(ConfigError, match="READ_T"):
        access_notices(keyed, "0.0.0.0", {"GW_KEYS": "k1"})  # named but unset: refused, not open


def test_read_token_of() -> None:
    st = RouteLensConfig.model_validate(KEYED).storage
    assert read_token_of(st, {"READ_T": " r "}) == "r"
    assert read_token_of(RouteLensConfig.model_validate(FLEET).storage, {}) is None
