"""The limits the app colours by, read from the configuration the router runs with; nowhere else.

A metric that a hard constraint bounds (``constraints:``) is judged against that constraint:
red past its threshold (the router removes the instance there), yellow from its soft threshold
or re-entry bound (the score ramps down, or a latched-out instance stays out), green below. A
metric no constraint bounds falls back to the fleet grid's bands (``app.health``). Probe
thresholds (``probes.semantic.threshold`` and the references' own, ``probes.latency.tolerance``;
:meth:`Limits.probe`, see :mod:`app.ui.probe_limit`), the scoring's ``latency_slo_ms`` and the
cost unit (``app.cost_unit``) come from the same file.

The file is :data:`CONFIG_ENV` (``routelens app`` sets it), else ``routelens.yaml`` in the working
folder; without one, the configuration's defaults with the app settings of
:data:`app.ui.data.fleet.SETTINGS_ENV`. Pure apart from reading that file (cached by its mtime).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from app.ui.probe_limit import ProbeLimit, build_probe_limit, over_limit_apart, reference_thresholds
from app.units import DASH, METRIC_NAMES, Unit, fmt, metric_unit
from schemas.config import AppSettings, ConstraintSpec, HealthThresholds, RouteLensConfig
from schemas.config.probes import ProbeSettings

__all__ = ["CONFIG_ENV", "SETTINGS_ENV", "STATUS_RANK", "Limit", "Limits", "load_limits"]

CONFIG_ENV = "ROUTELENS_CONFIG"
SETTINGS_ENV = "ROUTELENS_APP_SETTINGS"  # AppSettings as JSON, handed over by ``routelens app``
DEFAULT_CONFIG = "routelens.yaml"
STATUS_RANK = {"green": 0, "yellow": 1, "red": 2}


@dataclass(frozen=True)
class Limit:
    """One metric's bound: where it turns yellow (``warn``) and red (``threshold``), and who set it.

    ``op`` is the constraint's (``<=``/``<``: the metric must stay low; ``>=``/``>``: high).
    ``source`` names the setting, e.g. ``constraint kv-cache`` or ``app.health.queue``.
    """

    metric: str
    threshold: float
    warn: float | None
    op: str
    source: str
    hard: bool

    @property
    def unit(self) -> Unit:
        """The metric's unit."""
        return metric_unit(self.metric)

    def broken(self, value: float | None) -> bool:
        """True when ``value`` is past the threshold (None: unknown, not broken)."""
        if value is None:
            return False
        return {"<=": value > self.threshold, "<": value >= self.threshold,
                ">=": value < self.threshold, ">": value <= self.threshold}[self.op]

    def status(self, value: float | None) -> str | None:
        """``red`` past the threshold, ``yellow`` past ``warn``, else ``green``; None without a value."""
        if value is None:
            return None
        if self.broken(value):
            return "red"
        if self.warn is not None and (value >= self.warn if self.op in ("<=", "<") else value <= self.warn):
            return "yellow"
        return "green"

    def text(self, value: float | None) -> str:
        """``value / limit`` with the unit: ``92% / 85%`` (``85.1% / 85.0%``: never two different numbers alike)."""
        return over_limit_apart(value, self.threshold, self.unit)

    def describe(self) -> str:
        """The limit as a sentence part: ``KV-cache ≤ 85% (constraint kv-cache; yellow from 80%)``."""
        warn = f"; yellow from {fmt(self.warn, self.unit)}" if self.warn is not None else ""
        return (f"{METRIC_NAMES.get(self.metric, self.metric)} {self.op.replace('<=', '≤').replace('>=', '≥')} "
                f"{fmt(self.threshold, self.unit)} ({self.source}{warn})")


def _applies(spec: ConstraintSpec, model: str | None, instance: str | None) -> bool:
    return (not spec.models or model is None or model in spec.models) and (
        not spec.instances or instance is None or instance in spec.instances)


@dataclass(frozen=True)
class Limits:
    """Everything the app judges by, from one configuration (:func:`load_limits`)."""

    constraints: tuple[ConstraintSpec, ...]
    health: HealthThresholds = HealthThresholds()
    probes: ProbeSettings = ProbeSettings()
    latency_slo_ms: float = 3000.0
    cost_unit: str = "cost units"
    references: str | None = None  # probes.semantic.references (None: the packaged file)
    source: str = "defaults"
    problem: str | None = None
    _memo: dict[tuple[str, str | None, str | None], Limit | None] = field(default_factory=dict, compare=False)

    def limit(self, metric: str, model: str | None = None, instance: str | None = None) -> Limit | None:
        """The bound on ``metric`` for this instance: the tightest hard constraint, else ``app.health``'s band."""
        key = (metric, model, instance)
        if key not in self._memo:
            self._memo[key] = self._find(metric, model, instance)
        return self._memo[key]

    def _find(self, metric: str, model: str | None, instance: str | None) -> Limit | None:
        hard = [c for c in self.constraints if c.metric == metric and _applies(c, model, instance)]
        if hard:
            low = [c for c in hard if c.upper_bound]
            spec = min(low, key=lambda c: c.threshold) if low else max(hard, key=lambda c: c.threshold)
            warn = spec.soft_threshold if spec.soft_threshold is not None else (
                spec.enter_below if spec.enter_below is not None and spec.enter_below != spec.threshold else None)
            return Limit(metric, spec.threshold, warn, spec.op, f"constraint {spec.name}", True)
        band = getattr(self.health, metric, None)
        if band is None:
            return None
        return Limit(metric, band.red, band.yellow, "<", f"app.health.{metric}", False)

    def status(self, metric: str, value: float | None, model: str | None = None,
               instance: str | None = None) -> str | None:
        """The colour of ``value`` against its limit (None: no value, or no limit on the metric)."""
        lim = self.limit(metric, model, instance)
        return None if lim is None else lim.status(value)

    def text(self, metric: str, value: float | None, model: str | None = None, instance: str | None = None) -> str:
        """``value / limit`` when the metric has a limit, else the value alone, with its unit."""
        lim = self.limit(metric, model, instance)
        return fmt(value, metric_unit(metric)) if lim is None else lim.text(value)

    def constraint(self, name: str) -> ConstraintSpec | None:
        """The constraint called ``name`` (a latch or a filter step names it), None when the config has none."""
        return next((c for c in self.constraints if c.name == name), None)

    def latch_text(self, name: str, value: float | None) -> str:
        """A constraint's measured value against its threshold, ``92% / 85%`` (the value alone when unknown)."""
        spec = self.constraint(name)
        if spec is None:
            return fmt(value, "n") if value is None or value >= 10 else f"{value:.3g}"
        return over_limit_apart(value, spec.threshold, metric_unit(spec.metric))

    def probe(self, kind: str, baseline: float | None = None, reference: str | None = None) -> ProbeLimit | None:
        """The bound a ``kind`` probe's value is judged against (``baseline``: latency's; ``reference``: semantic's)."""
        return build_probe_limit(kind, self.probes, reference_thresholds(self.references) if kind == "semantic"
                                 else {}, baseline=baseline, reference=reference)

    def cost(self, value: float | None) -> str:
        """A cost in the configured unit."""
        return fmt(value, "cost", self.cost_unit)

    def summary(self, metrics: Sequence[str]) -> str:
        """One line naming each metric's limit, for a caption (``—`` for a metric without one)."""
        parts = [lim.describe() if (lim := self.limit(m)) is not None else f"{METRIC_NAMES.get(m, m)} {DASH}"
                 for m in metrics]
        return "; ".join(parts)


def _from_config(config: RouteLensConfig, source: str) -> Limits:
    return Limits(constraints=tuple(config.constraints), health=config.app.health, probes=config.probes,
                  latency_slo_ms=config.scoring.latency_slo_ms, cost_unit=config.app.cost_unit,
                  references=config.probes.semantic.references, source=source)


@lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int) -> Limits:
    from app.config import load_config

    return _from_config(load_config(path), path)


def _defaults(env: Mapping[str, str], problem: str | None) -> Limits:
    constraints = RouteLensConfig.model_fields["constraints"].get_default(call_default_factory=True)
    raw = env.get(SETTINGS_ENV, "").strip()
    app = AppSettings()
    if raw:
        try:
            app = AppSettings.model_validate_json(raw)
        except ValidationError as exc:
            problem = problem or f"{SETTINGS_ENV} is not valid app settings ({exc.error_count()} errors)"
    return Limits(constraints=tuple(constraints), health=app.health,
                  cost_unit=app.cost_unit, problem=problem)


def load_limits(environ: Mapping[str, str] | None = None) -> Limits:
    """The limits of the running configuration (see the module's docstring); defaults with a ``problem`` on error."""
    env = os.environ if environ is None else environ
    named = env.get(CONFIG_ENV, "").strip()
    path = Path(named or DEFAULT_CONFIG)
    if not path.is_file():
        return _defaults(env, f"the configuration {named} does not exist" if named else None)
    try:
        return _read(str(path.resolve()), path.stat().st_mtime_ns)
    except (OSError, ValueError) as exc:
        return _defaults(env, f"{path} could not be read ({str(exc).splitlines()[0]})")
