"""Reading a YAML configuration or policy file: the one place that turns a file into a validated model.

Every path the file names is resolved here, once, against the file's own folder (see
:mod:`schemas.paths`), so the result means the same from any working directory and can be written
out again (the demo's derived config) without losing where its files are. An input file that
cannot be read is an error naming the file, line and field that named it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from schemas.paths import path_context
from schemas.yamlconf import parse_yaml_model

__all__ = ["not_utf8", "read_config", "read_model", "unreadable"]

M = TypeVar("M", bound=BaseModel)


log = logging.getLogger(__name__)


def unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file (None when it can)."""
    try:
        with path.open("rb"):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def not_utf8(raw: bytes, exc: UnicodeDecodeError) -> tuple[int, int, str]:
    """Where decoding ``raw`` as UTF-8 failed (``exc``): its line and column, 1-based, and the byte (``byte 0xe9``).

    The column counts characters, as an editor (and PyYAML's marks) do: the line before the byte
    decodes, since the byte is the first that does not.
    """
    start = raw.rfind(b"\n", 0, exc.start) + 1
    line = raw.count(b"\n", 0, exc.start) + 1
    column = len(raw[start:exc.start].decode("utf-8")) + 1
    return line, column, f"byte 0x{raw[exc.start]:02x}"


def left_behind(value: str, resolved: Path) -> None:
    """Warn when a relative output path may not be where the data is.

    It resolves beside the configuration to nothing, while the same path from the working folder
    (where versions before 2026-12-04 resolved it) holds a file or folder: the program would begin
    an empty store beside the old one. A warning, not an error: both may be meant.
    """
    given = Path(value).expanduser()
    if given.is_absolute() or resolved.exists():
        return
    old = Path(os.path.abspath(given))
    if old != resolved and old.exists():
        log.warning("%s resolves beside the configuration, to %s, which does not exist yet, while %s (from the "
                    "working folder, where RouteLens before 2026-12-04 resolved it) does: a new one starts at %s; "
                    "name the one you mean by its absolute path, or move it beside the configuration",
                    value, resolved, old, resolved)


def read_model(model: type[M], path: str | Path, *, field: str = "<file>") -> M:
    """Load and validate the YAML file ``path`` as ``model``, its paths resolved against its folder.

    Args:
        model: The model to build (``RouteLensConfig``, a policy file...).
        path: The file.
        field: What named the file, for the error when it cannot be read.

    Raises:
        ConfigError: The file cannot be read, or does not validate (file, line and field named).
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(str(p), [(None, field, f"cannot read: {exc.strerror or exc}")]) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # YAML files are UTF-8: name where the first other byte is
        line, column, byte = not_utf8(raw, exc)
        raise ConfigError(str(p), [(line, field, f"not UTF-8: {byte} at column {column}")]) from exc
    return parse_yaml_model(model, text, str(p), context=path_context(p.parent, unreadable, left_behind))


def read_config(path: str | Path) -> RouteLensConfig:
    """Load and validate a ``routelens.yaml`` (ConfigError names file, line and field)."""
    return read_model(RouteLensConfig, path)
