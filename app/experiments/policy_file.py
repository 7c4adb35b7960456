"""The policy a replay decides under, from a file: a whole ``routelens.yaml``, a routing policy or config sections.

A file with a ``fleet:`` section is a whole configuration and is taken as it is (so a replay can
drop an instance or a model from the fleet). A routing policy (a ``routing_matrix`` and/or
``routing_dsl`` file such as ``policies/seed000.yaml``, or a bare ``.dsl``) takes the place of the
base configuration's ``routing.policy``. Any other file is a policy file, as an experiment arm's
(:func:`router_core.experiments.arms.load_policy`): its ``router``, ``constraints``, ``scoring`` and
``models`` sections replace the base configuration's. Errors name the file, line and field
(:class:`schemas.errors.ConfigError`; a routing policy's, file, line and column).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml

from app.config import load_config
from router_core import PluginError, arm_config, build_policy, builtin_registry, load_rules
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError

__all__ = ["load_replay_policy"]

_RULES = {"routing_matrix", "routing_dsl"}  # what makes a YAML file a routing policy (schemas.policy_file)


def _kind(path: Path) -> Literal["config", "rules", "sections"]:
    if path.suffix == ".dsl":
        return "rules"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return "config"  # load_config names the problem
    if not isinstance(data, dict) or "fleet" in data:
        return "config"
    return "rules" if data.keys() & _RULES else "sections"


def load_replay_policy(path: str | Path, base: str | Path | None) -> RouteLensConfig:
    """Return the configuration to replay under.

    Args:
        path: A ``routelens.yaml`` (with ``fleet:``), a routing policy or a policy file of sections.
        base: The configuration a routing policy or a policy file's sections go into (ignored for a
            whole config).

    Raises:
        ConfigError: Either file is missing, unreadable or invalid, or a plugin does not build.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(str(p), [(None, "<file>", "no such policy file")])
    kind = _kind(p)
    if kind == "config":
        config = load_config(p)
    else:
        if base is None or not Path(base).is_file():
            raise ConfigError(str(p), [(None, "fleet", f"a policy file without a fleet needs the base configuration "
                                                       f"(--config; {base} does not exist)")])
        config = load_config(base)
        if kind == "rules":
            routing = config.routing.model_copy(update={"policy": str(p.resolve())})
            config = config.model_copy(update={"routing": routing})
            load_rules(str(p.resolve()), config)  # a rule set that does not load: its file, line and column
        else:
            config = arm_config(config, str(p), field="--policy")
    try:
        build_policy(config, builtin_registry())
    except PluginError as exc:
        raise exc.at(str(p), p.read_text(encoding="utf-8")) from exc
    return config
