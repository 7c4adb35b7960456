"""PolicyFile: the gate's policy file, reloaded whole when it changes and still compiles.

A file that no longer compiles, or is gone, keeps the last good rule set and says why in
``last_error``; the same look starts a refit when the intents' routes file changed
(:mod:`router_core.gateway.live_intents`). :class:`~router_core.gateway.policy_gate.PolicyGate`
inherits these methods; the gateway's watch loop calls :meth:`PolicyFile.check`, never a request.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from router_core.errors import PolicyError
from router_core.gateway.live_intents import LiveIntents
from router_core.rules.ir import RuleSet
from router_core.rules.load import load_policy
from schemas.config import RouteLensConfig

__all__ = ["PolicyFile", "policy_path"]

log = logging.getLogger("router_core.gateway.policy_gate")  # the gate's lines keep the gate's logger name


def policy_path(config: RouteLensConfig) -> Path | None:
    """The policy file ``routing.policy`` names (None: no policy).

    Absolute when the config was read from a file: :mod:`router_core.config_file` resolves every
    path against the folder of the file that names it, once, at load time.
    """
    return Path(config.routing.policy) if config.routing.policy else None


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class PolicyFile:
    """The policy file of a :class:`~router_core.gateway.policy_gate.PolicyGate`: reload, check, watch.

    Reads and sets the gate's ``config``, ``rules``, ``path``, ``last_error``, ``live_intents``
    and the file's stamp as last loaded (``_seen``).
    """

    config: RouteLensConfig
    rules: RuleSet | None
    path: Path | None
    last_error: str | None
    live_intents: LiveIntents | None
    _seen: tuple[int, int] | None

    def reload(self) -> bool:
        """Re-read the policy file; on a load error keep the last good rule set. True when swapped."""
        if self.path is None:
            return False
        try:
            self.rules = load_policy(self.path, self.config)
        except PolicyError as exc:
            self.last_error = str(exc)
            log.error("routing policy not reloaded (the last good one stays): %s", exc)
            return False
        self.last_error = None
        return True

    def check(self) -> bool:
        """Reload the policy file if its modification time or size changed since the last look; True when swapped.

        A changed routes file of ``routing.intents`` starts a refit in the background (the classifier in force
        serves until it is done).
        """
        if self.live_intents is not None:
            self.live_intents.check()
        if self.path is None:
            return False
        stamp = _stamp(self.path)
        if stamp is None and self._seen is not None:  # deleted or moved: say so, where a bad edit is said
            self._seen = None
            self.last_error = f"{self.path}: the policy file is gone (the last good policy stays; a restart would fail)"
            log.error("routing policy: %s", self.last_error)
            return False
        if stamp is None or stamp == self._seen:
            return False
        self._seen = stamp
        return self.reload()

    async def watch(self, interval_s: float = 1.0) -> None:
        """Reload the policy file (and refit the intents) whenever a file changes, until cancelled."""
        while True:
            await asyncio.sleep(interval_s)
            self.check()
