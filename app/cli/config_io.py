"""Reading ``routelens.yaml`` from disk (the schemas room does no I/O)."""

from __future__ import annotations

from pathlib import Path

from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from schemas.yamlconf import parse_yaml_model

__all__ = ["load_config"]


def load_config(path: str | Path) -> RouteLensConfig:
    """Load and validate a configuration file.

    Raises:
        ConfigError: When the file is missing, unreadable or invalid (file, line and field named).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(p), [(None, "<file>", f"cannot read: {exc.strerror or exc}")]) from exc
    config = parse_yaml_model(RouteLensConfig, text, str(p))
    if config.router.plugins is not None:
        _check_plugins(config, str(p), text)
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
