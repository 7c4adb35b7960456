"""Hot reload of the configuration file: poll its modification time, load it, hand it over.

The loader and the apply step are injected (the router room reads no config files of its own
accord); a file that does not load is logged and the running experiment stays as it was. The
gateway applies ``experiments`` and ``routing.intents``; :class:`RestartNeeded` names every other
section the file changed, which only a restart applies, and warns once per change.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from router_core.config_file import read_config
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError

__all__ = ["ConfigWatcher", "RestartNeeded", "read_config"]

log = logging.getLogger(__name__)


class ConfigWatcher:
    """Calls ``apply(config)`` whenever the file at ``path`` changes and still loads.

    Args:
        path: The configuration file.
        apply: Takes the new configuration (raises ConfigError to refuse it).
        load: Reads the file (default: :func:`read_config`).
        interval_s: Seconds between two looks at the file's modification time.
        sleep: Injected for tests.
    """

    def __init__(self, path: str | Path, apply: Callable[[RouteLensConfig], None], *,
                 load: Callable[[Path], RouteLensConfig] = read_config, interval_s: float = 1.0,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.path = Path(path)
        self._apply = apply
        self._load = load
        self.interval_s = interval_s
        self._sleep = sleep
        self._seen = self._stamp()
        self.reloads = 0
        self.last_error: str | None = None

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def check(self) -> bool:
        """Look once; return True when a changed file was loaded and applied."""
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return False
        self._seen = stamp
        try:
            self._apply(self._load(self.path))
        except ConfigError as exc:
            self.last_error = str(exc)
            log.error("configuration not reloaded: %s", exc)
            return False
        except Exception as exc:  # noqa: BLE001  (a fault must not end the watching: later edits still count)
            self.last_error = f"{self.path}: {type(exc).__name__}: {exc}"
            log.exception("configuration not reloaded: %s", self.last_error)
            return False
        self.reloads += 1
        self.last_error = None
        return True

    async def run(self) -> None:
        """Check every ``interval_s`` until cancelled."""
        while True:
            await self._sleep(self.interval_s)
            self.check()


class RestartNeeded:
    """The sections a changed configuration file holds that the running gateway does not apply.

    Args:
        applied: What a reload applies, as top-level sections (``experiments``) or ``section.field``
            (``routing.intents``); every other changed field is named: ``gateway``, ``routing.policy``...
    """

    def __init__(self, applied: Collection[str] = ("experiments", "routing.intents")) -> None:
        self.applied = frozenset(applied)
        self.sections: list[str] = []  # changed in the file, in force only after a restart
        self._seen: dict[str, str] = {}  # each of them as last warned about

    def update(self, running: RouteLensConfig, new: RouteLensConfig, source: str | Path | None = None) -> list[str]:
        """Compare ``new`` with the ``running`` configuration; warn about each section changed since the last look."""
        changed = _unapplied(running, new, self.applied)
        fresh = sorted(name for name, value in changed.items() if self._seen.get(name) != value)
        if fresh:
            log.warning("configuration%s: %s changed and needs a restart (a running gateway applies only %s)",
                        f" {source}" if source else "", ", ".join(fresh), " and ".join(sorted(self.applied)))
        self._seen = changed
        self.sections = sorted(changed)
        return self.sections


def _unapplied(running: RouteLensConfig, new: RouteLensConfig, applied: frozenset[str]) -> dict[str, str]:
    """Each changed field that a reload does not apply, by name, with its new value as canonical JSON."""
    out: dict[str, str] = {}
    for name in type(running).model_fields:
        old, got = getattr(running, name), getattr(new, name)
        if name in applied or old == got:
            continue
        inner = {a.split(".", 1)[1] for a in applied if a.startswith(f"{name}.")}
        if inner and old is not None and got is not None:  # only some of its fields are applied: name the others
            for field in type(old).model_fields:
                if field not in inner and getattr(old, field) != getattr(got, field):
                    out[f"{name}.{field}"] = _canonical(getattr(got, field))
        else:
            out[name] = _canonical(got)
    return out


def _canonical(value: Any) -> str:
    return json.dumps(to_jsonable_python(value), sort_keys=True)
