"""docker-compose.yml starts: every RouteLens server in it passes the access checks it runs at start.

No Docker engine runs here, so the compose file is read as compose would: each service's command
with ``${VAR:-default}`` at its default, its environment the file's defaults, and each config the
command can name (``ROUTELENS_COMPOSE_CONFIG`` picks the Elasticsearch one). The gateway listens
on 0.0.0.0, so every surface it serves needs its token; the store and the prober ``serve`` starts
listen on loopback and must still find each token their config names.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import load_config
from app.run.access import access_notices, prober_notices, store_notices
from app.run.storage import RELAY_TOKEN_ENV

ROOT = Path(__file__).resolve().parents[1]
VAR = re.compile(r"\$\{(\w+):-([^}]*)\}")
CONFIGS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "deploy").glob("routelens.compose*.yaml"))


def services() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data["services"]


def at_defaults(text: str, chosen: dict[str, str]) -> str:
    return VAR.sub(lambda m: chosen.get(m.group(1), m.group(2)), text)


@pytest.mark.parametrize("config_path", CONFIGS)
def test_every_server_in_compose_passes_the_access_checks(config_path: str) -> None:
    assert len(CONFIGS) == 2
    servers = 0
    for name, svc in services().items():
        argv = shlex.split(at_defaults(str(svc.get("command", "")), {"ROUTELENS_COMPOSE_CONFIG": config_path}))
        if argv[:1] != ["routelens"] or "serve" not in argv:
            continue
        env = {k: at_defaults(str(v), {}) for k, v in svc.get("environment", {}).items()}
        config = load_config(ROOT / argv[argv.index("--config") + 1])
        host = argv[argv.index("--host") + 1] if "--host" in argv else config.gateway.host
        assert host == "0.0.0.0", name  # what the gateway's published port needs
        assert access_notices(config, host, env) == [], name  # nothing open: a notice would be a refusal here
        assert config.storage.intake_token_env in env, name  # POST /v1/traces, not guarded by the gateway's keys
        # the store and the prober serve starts: loopback, the relay token serve makes for them
        store_notices(config, "127.0.0.1", env | {RELAY_TOKEN_ENV: "made-by-serve"})
        prober_notices(config, "127.0.0.1", owns_store=False, environ=env)
        servers += 1
    assert servers == 1  # the gateway: no store or prober service of its own
