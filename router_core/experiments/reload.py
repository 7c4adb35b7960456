"""Hot reload of the configuration file: poll its modification time, load it, hand it over.

The loader and the apply step are injected (the router room reads no config files of its own
accord); a file that does not load is logged and the running experiment stays as it was.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from router_core.config_file import read_config
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError

__all__ = ["ConfigWatcher", "read_config"]

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
