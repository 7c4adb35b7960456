"""docker-compose.yml and its files: DuckDB by default, Elasticsearch behind a profile, Prometheus scraping.

No Docker engine runs here, so ``docker compose config`` cannot; these checks read the same files.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def test_the_default_services_start_without_elasticsearch() -> None:
    services = compose()["services"]
    default = {name for name, svc in services.items() if not svc.get("profiles")}
    assert default == {"sim", "gateway", "app", "prometheus"}
    assert services["elasticsearch"]["profiles"] == ["elasticsearch"]
    for name in default:
        deps = services[name].get("depends_on", {})
        for dep, cond in (deps.items() if isinstance(deps, dict) else ((d, {}) for d in deps)):
            if dep not in default:
                assert cond.get("required") is False, f"{name} needs {dep}, which only runs with a profile"


def test_every_routelens_service_is_started_again_when_it_dies() -> None:
    # serve restarts what it started, not itself (docs/deployment.md): the container runtime does
    services = compose()["services"]
    for name in ("sim", "gateway", "app"):
        assert services[name]["restart"] == "unless-stopped", name


def test_the_default_configs_load_and_store_where_they_say() -> None:
    assert load_config(ROOT / "deploy/routelens.compose.yaml").storage.backend == "duckdb"
    assert load_config(ROOT / "deploy/routelens.compose-es.yaml").storage.backend == "elasticsearch"


@pytest.mark.parametrize("name", ["routelens.compose.yaml", "routelens.compose-es.yaml"])
def test_the_compose_configs_keep_their_data_on_the_traces_volume(name: str) -> None:
    """Paths are the config file's (deploy/), the volume is the image's /srv/.routelens: ROOT stands for /srv."""
    app = compose()["x-routelens"]
    assert app["build"] == {"context": ".", "dockerfile": "Dockerfile"}
    final = (ROOT / "Dockerfile").read_text().split("\nFROM ")[-1]  # the final stage: the image the services run
    workdir = next(line.split()[1] for line in final.splitlines() if line.startswith("WORKDIR"))
    volume = next(v.split(":")[1] for v in app["volumes"] if v.startswith("traces:"))
    stored = Path(load_config(ROOT / "deploy" / name).storage.duckdb_path)
    assert stored.parent == ROOT / Path(volume).relative_to(workdir)


def test_prometheus_scrapes_the_gateway() -> None:
    services = compose()["services"]
    mount = next(v for v in services["prometheus"]["volumes"] if "prometheus.yml" in v)
    config = yaml.safe_load((ROOT / mount.split(":")[0]).read_text())
    port = load_config(ROOT / "deploy/routelens.compose.yaml").gateway.port
    targets = [t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert f"gateway:{port}" in targets


def test_the_build_context_leaves_out_the_venv_and_stored_data() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".venv/", ".git/", ".routelens/", "*.duckdb"} <= ignored


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool missing: apt-get install -y prometheus")
def test_promtool_accepts_the_prometheus_config() -> None:
    out = subprocess.run(["promtool", "check", "config", str(ROOT / "deploy/prometheus.yml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
