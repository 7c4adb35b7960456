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
    return parse_yaml_model(RouteLensConfig, text, str(p))
