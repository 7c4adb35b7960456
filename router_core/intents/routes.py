"""The routes file: YAML mapping each route name to its example utterances.

Errors are :class:`schemas.errors.ConfigError` naming the file and the line. A route needs at least
:data:`MIN_EXAMPLES` examples (the calibration holds each out in turn and scores it against the
route's others). One utterance under two routes (compared ignoring case and spacing) is a
contradiction: :func:`append_examples` refuses to write one, and :func:`load_routes` logs a warning
naming both lines (a file that loaded before still loads: a gateway keeps starting, and sets made
from templates have a few, as Home Assistant's Chinese one does). :func:`append_examples` adds
utterances to one route (creating it when new) and rewrites the file in the same shape; it may leave
a route short of the minimum (a route is built up a few utterances at a time), which
:func:`load_routes` then refuses until it has enough.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

import yaml

from router_core.config_file import not_utf8
from schemas.errors import ConfigError

__all__ = ["MIN_EXAMPLES", "append_examples", "load_routes", "route_hash", "too_few"]

Routes = dict[str, list[str]]

log = logging.getLogger(__name__)

MIN_EXAMPLES = 2  # with one, the held-out folds score the route's only example against none of its own


def too_few(n: int) -> str:
    """The problem of a route with ``n`` examples, under :data:`MIN_EXAMPLES`."""
    return (f"{n} example{'s' if n != 1 else ''}: a route needs at least {MIN_EXAMPLES} (the calibration holds "
            "each example out and scores it against the route's others)")


def _key(text: str) -> str:
    """What makes two utterances the same one: case and spacing aside."""
    return " ".join(text.casefold().split())


def _fail(path: Path, line: int | None, field: str, message: str) -> ConfigError:
    return ConfigError(str(path), [(line, field, message)], what="routes file")


def load_routes(path: str | Path) -> Routes:
    """Read ``path``: route name -> list of at least :data:`MIN_EXAMPLES` utterances (blank ones dropped, order kept).

    An utterance under two routes is logged as a warning (``file:line: route: ...``), once for each.

    Raises:
        ConfigError: The file is missing, not UTF-8, not YAML, not a mapping of names to lists of
            strings, or a route has fewer than :data:`MIN_EXAMPLES` utterances.
    """
    return _parse(Path(path), MIN_EXAMPLES)[0]


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _fail(path, None, "<file>", f"cannot read: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # name where the first other byte is, as the configuration does
        line, column, byte = not_utf8(raw, exc)
        raise _fail(path, line, "routes", f"not UTF-8: {byte} at column {column}") from exc


def _syntax_error(path: Path, text: str, exc: yaml.YAMLError) -> ConfigError:
    """PyYAML's error as one line: the line, the column and the problem (not its multi-line dump)."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        line, column, problem = mark.line + 1, mark.column + 1, getattr(exc, "problem", None) or first
    elif isinstance(exc, yaml.reader.ReaderError):  # a character YAML refuses: its position, and "#x0007: ..."
        line = text.count("\n", 0, exc.position) + 1
        column, problem = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1, first
    else:
        return _fail(path, None, "routes", f"YAML syntax error: {first}")
    return _fail(path, line, "routes", f"YAML syntax error at column {column}: {problem}")


def _parse(path: Path, least: int, *, quiet: bool = False) -> tuple[Routes, dict[str, list[int]]]:
    """:func:`load_routes` with routes of ``least`` examples allowed (``append_examples`` builds a route up).

    ``quiet``: no warning logged (the file is about to be rewritten: its lines would be stale).

    Returns:
        The routes, and the line of each utterance (route -> lines, in the order of its utterances).
    """
    text = _read_text(path)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise _syntax_error(path, text, exc) from exc
    if root is None:
        raise _fail(path, None, "<file>", "empty: no routes")
    if not isinstance(root, yaml.MappingNode):
        raise _fail(path, root.start_mark.line + 1, "routes", "must map route names to lists of utterances")
    routes: Routes = {}
    lines: dict[str, list[int]] = {}
    seen: dict[str, tuple[str, int]] = {}  # utterance key -> (route, line)
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
        at_lines: list[int] = []
        for item in value.value:
            if not isinstance(item, yaml.ScalarNode) or item.tag != "tag:yaml.org,2002:str":
                raise _fail(path, item.start_mark.line + 1, name, "each utterance must be a string")
            if item.value.strip():
                texts.append(item.value.strip())
                at = item.start_mark.line + 1
                at_lines.append(at)
                other, other_at = seen.setdefault(_key(item.value), (name, at))
                if other != name and not quiet:  # the line, not the text: a log never holds an utterance
                    log.warning("%s:%d: %s: the same utterance as line %d of route %r: an utterance under two "
                                "routes contradicts itself (keep it under one)", path, at, name, other_at, other)
        if not texts:
            raise _fail(path, line, name, "no utterances")
        if len(texts) < least:
            raise _fail(path, line, name, too_few(len(texts)))
        routes[name] = texts
        lines[name] = at_lines
    return routes, lines


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

    Leading comment lines of the file are kept; the rest is rewritten in :func:`dump_routes` form
    (other comments are dropped). An example already under ``route`` is not added twice. The route
    may end with fewer than :data:`MIN_EXAMPLES` examples (:func:`load_routes` refuses it until it
    has enough).

    Returns:
        The routes as written.

    Raises:
        ConfigError: The route name is empty, the existing file is invalid, no example is given, or
            an example is already under another route (the file is then left untouched).
    """
    path = Path(path)
    if not isinstance(route, str) or not route.strip():
        raise _fail(path, None, "routes", "a route name must be a non-empty string")
    new = [e.strip() for e in examples if e.strip()]
    if not new:
        raise _fail(path, None, route, "no examples to add")
    routes, lines = _parse(path, 1, quiet=True) if path.exists() else ({}, {})
    owner: dict[str, tuple[str, int]] = {}  # an utterance of another route -> (that route, its first line)
    for r, ts in routes.items():
        for t, at in zip(ts, lines[r], strict=True):
            if r != route:
                owner.setdefault(_key(t), (r, at))
    for e in new:
        if _key(e) in owner:
            other, at = owner[_key(e)]
            raise _fail(path, at, other, f"{e[:60]!r} is already an example of route {other!r}: adding it to "
                        f"{route!r} would put an utterance under two routes, which contradicts itself")
    header = []
    if path.exists():
        for line in _read_text(path).splitlines():
            if not line.startswith("#"):
                break
            header.append(line)
    routes.setdefault(route, [])
    routes[route] = routes[route] + [e for e in new if e not in routes[route]]
    _write_atomic(path, "\n".join(header) + ("\n" if header else "") + dump_routes(routes))
    _parse(path, 1)  # its warnings, with the lines of the file as written
    return routes


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it over ``path`` (all or nothing)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _fail(path, None, "<file>", f"cannot write: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _fail(path, None, "<file>", f"cannot write: {exc.strerror or exc}") from exc
