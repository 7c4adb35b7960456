"""The routes file: YAML mapping each route name to its example utterances.

Errors are :class:`schemas.errors.ConfigError` naming the file and the line. :func:`append_examples`
adds utterances to one route (creating it when new) and rewrites the file in the same shape.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import yaml

from schemas.errors import ConfigError

__all__ = ["append_examples", "load_routes", "route_hash"]

Routes = dict[str, list[str]]


def _fail(path: Path, line: int | None, field: str, message: str) -> ConfigError:
    return ConfigError(str(path), [(line, field, message)])


def load_routes(path: str | Path) -> Routes:
    """Read ``path``: route name -> non-empty list of utterances (blank ones dropped, order kept).

    Raises:
        ConfigError: The file is missing, not YAML, not a mapping of names to lists of strings,
            or a route has no utterance.
    """
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise _fail(path, None, "routes", f"cannot read: {exc.strerror or exc}") from exc
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise _fail(path, mark.line + 1 if mark else None, "routes", f"not YAML: {exc}") from exc
    if root is None:
        raise _fail(path, None, "routes", "empty: no routes")
    if not isinstance(root, yaml.MappingNode):
        raise _fail(path, root.start_mark.line + 1, "routes", "must map route names to lists of utterances")
    routes: Routes = {}
    for key, value in root.value:
        line = key.start_mark.line + 1
        name = key.value if isinstance(key, yaml.ScalarNode) else ""
        if not isinstance(name, str) or not name.strip():
            raise _fail(path, line, "routes", "a route name must be a non-empty string")
        if name in routes:
            raise _fail(path, line, name, "duplicate route")
        if not isinstance(value, yaml.SequenceNode):
            raise _fail(path, value.start_mark.line + 1, name, "must be a list of utterances")
        texts: list[str] = []
        for item in value.value:
            if not isinstance(item, yaml.ScalarNode) or item.tag != "tag:yaml.org,2002:str":
                raise _fail(path, item.start_mark.line + 1, name, "each utterance must be a string")
            if item.value.strip():
                texts.append(item.value.strip())
        if not texts:
            raise _fail(path, line, name, "no utterances")
        routes[name] = texts
    return routes


def route_hash(examples: list[str]) -> str:
    """A stable hash of one route's examples (order matters: K-means is seeded on it)."""
    return hashlib.sha256(json.dumps(examples, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def dump_routes(routes: Routes) -> str:
    """Render ``routes`` as the routes file's YAML (one quoted utterance a line)."""
    lines: list[str] = []
    for name, texts in routes.items():
        lines.append(f"{json.dumps(name, ensure_ascii=False)}:")
        lines += [f"  - {json.dumps(t, ensure_ascii=False)}" for t in texts]
    return "\n".join(lines) + "\n"


def append_examples(path: str | Path, route: str, examples: list[str]) -> Routes:
    """Append ``examples`` to ``route`` in the routes file (creating the route, or the file, if new).

    Leading comment lines of the file are kept; the rest is rewritten in :func:`dump_routes` form.

    Returns:
        The routes as written.

    Raises:
        ConfigError: The route name is empty, the existing file is invalid, or no example is given
            (the file is then left untouched).
    """
    path = Path(path)
    if not isinstance(route, str) or not route.strip():
        raise _fail(path, None, "routes", "a route name must be a non-empty string")
    new = [e.strip() for e in examples if e.strip()]
    if not new:
        raise _fail(path, None, route, "no examples to add")
    routes = load_routes(path) if path.exists() else {}
    header = []
    if path.exists():
        for line in path.read_text("utf-8").splitlines():
            if not line.startswith("#"):
                break
            header.append(line)
    routes.setdefault(route, [])
    routes[route] = routes[route] + [e for e in new if e not in routes[route]]
    _write_atomic(path, "\n".join(header) + ("\n" if header else "") + dump_routes(routes))
    return routes


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it over ``path`` (all or nothing)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _fail(path, None, "routes", f"cannot write: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _fail(path, None, "routes", f"cannot write: {exc.strerror or exc}") from exc
