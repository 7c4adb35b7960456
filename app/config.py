"""Reading ``routelens.yaml`` from disk (the schemas room does no I/O), for every part of the app.

The command line, the process wiring, the Streamlit pages and the experiments tooling all load
the configuration here, below each of them. The router is imported on first load, not with this
module: ``routelens --help`` and commands that never read a configuration start without it.
"""

from __future__ import annotations

from pathlib import Path

from schemas.config import RouteLensConfig

__all__ = ["load_config"]


def load_config(path: str | Path) -> RouteLensConfig:
    """Load and validate a configuration file, every path it names made absolute against its folder.

    Raises:
        ConfigError: When the file is missing, unreadable or invalid (file, line and field named).
    """
    from router_core import read_config  # here: the router's import costs every command 0.3 s

    config = read_config(path)
    if config.router.plugins is not None:
        _check_plugins(config, str(path), Path(path).read_text(encoding="utf-8"))
    return config


def _check_plugins(config: RouteLensConfig, source: str, text: str) -> None:
    """Build the explicit plugin list once, so a bad plugin fails at load time naming file, line and ``name/type``.

    Plugins derived from the other sections are valid by construction (their sections validated
    above), so configurations without ``router.plugins`` skip this and the router import.
    """
    from router_core import PluginError, build_policy, builtin_registry

    try:
        build_policy(config, builtin_registry())
    except PluginError as exc:
        raise exc.at(source, text) from exc
