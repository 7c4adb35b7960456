"""The policy a replay decides under, from a file: a whole ``routelens.yaml`` or a policy file.

A file with a ``fleet:`` section is a whole configuration and is taken as it is (so a replay can
drop an instance or a model from the fleet). Any other file is a policy file, as an experiment
arm's (:func:`router_core.experiments.arms.load_policy`): its ``router``, ``constraints``,
``scoring`` and ``models`` sections replace the base configuration's. Errors name the file, line
and field (:class:`schemas.errors.ConfigError`).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from app.config import load_config
from router_core import PluginError, arm_config, build_policy, builtin_registry
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError

__all__ = ["load_replay_policy"]


def _has_fleet(path: Path) -> bool:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return True  # load_config names the problem
    return isinstance(data, dict) and "fleet" in data


def load_replay_policy(path: str | Path, base: str | Path | None) -> RouteLensConfig:
    """Return the configuration to replay under.

    Args:
        path: A ``routelens.yaml`` (with ``fleet:``) or a policy file.
        base: The configuration a policy file's sections go into (ignored for a whole config).

    Raises:
        ConfigError: Either file is missing, unreadable or invalid, or a plugin does not build.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(str(p), [(None, "<file>", "no such policy file")])
    if _has_fleet(p):
        config = load_config(p)
    else:
        if base is None or not Path(base).is_file():
            raise ConfigError(str(p), [(None, "fleet", f"a policy file without a fleet needs the base configuration "
                                                       f"(--config; {base} does not exist)")])
        config = arm_config(load_config(base), str(p), field="--policy")
    try:
        build_policy(config, builtin_registry())
    except PluginError as exc:
        raise exc.at(str(p), p.read_text(encoding="utf-8")) from exc
    return config
