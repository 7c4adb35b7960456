"""The shipped ``routelens.yaml`` moved onto free loopback ports and a store in a test folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from app.run.procs import free_port

__all__ = ["demo_config"]

ROOT = Path(__file__).resolve().parents[2]


def demo_config(folder: Path) -> tuple[Path, dict[str, Any], list[int]]:
    """Write the shipped config with every port free and the DuckDB file in ``folder``.

    Returns:
        The file, the configuration written, and its ports (instances, gateway, app).
    """
    shipped: dict[str, Any] = yaml.safe_load((ROOT / "routelens.yaml").read_text())
    ports = []
    for inst in shipped["fleet"]["instances"]:
        ports.append(free_port())
        inst["url"] = f"http://127.0.0.1:{ports[-1]}"
    shipped["gateway"]["port"] = free_port()
    shipped["app"]["port"] = free_port()
    ports += [shipped["gateway"]["port"], shipped["app"]["port"]]
    shipped["storage"]["duckdb_path"] = str(folder / "traces.duckdb")
    routing = shipped.get("routing", {})  # its files are relative to the shipped config's folder
    if routing.get("policy"):
        routing["policy"] = str(ROOT / routing["policy"])
    if routing.get("intents"):
        routing["intents"]["routes"] = str(ROOT / routing["intents"]["routes"])
    cfg = folder / "routelens.yaml"
    cfg.write_text(yaml.safe_dump(shipped))
    return cfg, shipped, ports
