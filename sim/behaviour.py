"""The behaviour model: the built-in model mix, warm-up, and the probability of a correct answer.

The built-in mix follows the seed's fleet: a 32k-context premium model that needs 90 s to warm up,
a 6B coder in fp16 and in int4 (which loses 28% of its accuracy on prompts with maths), and a
cheap 7B chat model. ``routelens sim fleet --instances N`` serves instance ``i`` as model
``i % 4`` of this list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from schemas.config import RouteLensConfig
from schemas.config.sim import QueryClassName, SimModelProfile, SimSettings
from schemas.fleet import CostSpec, InstanceSpec

__all__ = [
    "BUILTIN_MODELS",
    "BuiltinModel",
    "builtin_config",
    "configured_profile",
    "expected_model",
    "has_maths",
    "p_correct",
    "warmup_progress",
]


@dataclass(frozen=True, slots=True)
class BuiltinModel:
    """One model of the built-in mix: its name, instance id prefix, window, price and behaviour."""

    name: str
    short: str
    context_window: int
    cost: CostSpec
    profile: SimModelProfile


BUILTIN_MODELS: tuple[BuiltinModel, ...] = (
    BuiltinModel("deepseek-v4-32k", "v4-32k", 32768, CostSpec(base=1.8, surge_multiplier=2.1), SimModelProfile(
        base_latency_ms=60, decode_tps=120, prefill_tps=6000, max_concurrency=8, kv_tokens=32768, warmup_s=90,
        cost_class="premium",
        accuracy={"contract": 0.95, "ticket": 0.9, "code": 0.85, "math": 0.9, "chat": 0.92})),
    BuiltinModel("deepseek-coder-6b-fp16", "coder-fp16", 8192, CostSpec(base=1.0, surge_multiplier=1.2),
                 SimModelProfile(base_latency_ms=25, decode_tps=300, prefill_tps=12000, max_concurrency=16,
                                 kv_tokens=16384, warmup_s=20,
                                 accuracy={"contract": 0.7, "ticket": 0.9, "code": 0.93, "math": 0.86, "chat": 0.85})),
    BuiltinModel("deepseek-coder-6b-int4", "coder-int4", 4096, CostSpec(base=0.6, surge_multiplier=1.2),
                 SimModelProfile(base_latency_ms=20, decode_tps=420, prefill_tps=15000, max_concurrency=24,
                                 kv_tokens=12288, warmup_s=20, quantization="int4", cost_class="economy",
                                 accuracy={"contract": 0.6, "ticket": 0.88, "code": 0.88, "math": 0.86, "chat": 0.8})),
    BuiltinModel("default-7b-chat", "chat-7b", 4096, CostSpec(base=0.5, surge_multiplier=1.0), SimModelProfile(
        base_latency_ms=20, decode_tps=350, prefill_tps=10000, max_concurrency=16, kv_tokens=16384, warmup_s=10,
        cost_class="economy",
        accuracy={"contract": 0.55, "ticket": 0.8, "code": 0.6, "math": 0.6, "chat": 0.93})),
)

_MATHS = re.compile(r"[=^∫√∑π]|\d\s*[-+*/×÷]\s*\d|方程|积分|导数|概率|equation|integral|derivative|probability", re.I)
_COST_RANK = {"economy": 0, "standard": 1, "premium": 2}


def has_maths(text: str) -> bool:
    """Return True when ``text`` contains a formula or maths vocabulary (the int4 trap of the seed)."""
    return _MATHS.search(text) is not None


def warmup_progress(profile: SimModelProfile, model_age_s: float) -> float:
    """Return warm-up progress 0-1 after ``model_age_s`` seconds of model time since the last start."""
    if profile.warmup_s <= 0:
        return 1.0
    return min(1.0, max(0.0, model_age_s / profile.warmup_s))


def p_correct(profile: SimModelProfile, cls: QueryClassName, prompt: str, progress: float = 1.0) -> float:
    """Probability that a model answers a query of class ``cls`` correctly.

    Args:
        profile: The model's behaviour.
        cls: The query's true class.
        prompt: The prompt text; maths in it costs an int4 model ``math_penalty`` of its accuracy.
        progress: Warm-up progress; accuracy ramps from ``cold_accuracy`` to full.

    Returns:
        The probability, 0-1.
    """
    p = profile.accuracy.get(cls, profile.default_accuracy)
    if profile.quantization == "int4" and has_maths(prompt):
        p *= 1.0 - profile.math_penalty
    return p * (profile.cold_accuracy + (1.0 - profile.cold_accuracy) * progress)


def configured_profile(name: str, profile: SimModelProfile | None) -> SimModelProfile:
    """A model's simulated behaviour: what ``sim.models.<name>`` sets, over the built-in model of that name.

    A configuration that tunes a built-in model's speed keeps its accuracy and price class (a
    profile replaced whole gave every model the default 0.9 accuracy and "standard" price, so no
    policy could differ on misroutes: the wrong answers feedback marks ``correct=false``). A model
    the configuration does not list gets the defaults.
    """
    if profile is None:
        return SimModelProfile()
    known = next((m.profile for m in BUILTIN_MODELS if m.name == name), None)
    if known is None:
        return profile
    return known.model_copy(update={field: getattr(profile, field) for field in profile.model_fields_set})


def expected_model(cls: QueryClassName, prompt: str, profiles: Mapping[str, SimModelProfile],
                   good_enough: float = 0.85) -> str | None:
    """Where a query should go: the cheapest model accurate enough for it, else the most accurate.

    Args:
        cls: The query's true class.
        prompt: Its text (maths matters for int4 models).
        profiles: The models served, by name.
        good_enough: Accuracy a model needs to count as adequate.

    Returns:
        A model name, or None when ``profiles`` is empty.
    """
    if not profiles:
        return None
    scored = [(name, p_correct(profile, cls, prompt), _COST_RANK[profile.cost_class])
              for name, profile in profiles.items()]
    adequate = [row for row in scored if row[1] >= good_enough]
    if adequate:
        return min(adequate, key=lambda row: (row[2], -row[1]))[0]
    return max(scored, key=lambda row: row[1])[0]


def builtin_config(instances: int, base_port: int, *, host: str = "127.0.0.1", zero_delay: bool = False,
                   time_scale: float = 1.0, seed: int = 0) -> RouteLensConfig:
    """The configuration of a fleet of the built-in mix: instance ``i`` on ``base_port + i``.

    Args:
        instances: How many instances (1-256).
        base_port: Port of instance 0; 0 binds every instance to a free port.
        host: Address to bind (loopback by default).
        zero_delay: Serve as fast as possible.
        time_scale: Model time runs this many times faster than real time.
        seed: Seeds answers and fault draws.

    Returns:
        A full configuration whose ``fleet`` and ``sim`` sections describe the mix.
    """
    if not 1 <= instances <= 256:
        raise ValueError("instances must be between 1 and 256")
    specs = []
    for i in range(instances):
        model = BUILTIN_MODELS[i % len(BUILTIN_MODELS)]
        port = 0 if base_port == 0 else base_port + i
        specs.append(InstanceSpec(id=f"{model.short}-{i}", model=model.name, url=f"http://{host}:{port}",
                                  zone=f"az{i % 2 + 1}", context_window=model.context_window, cost=model.cost))
    sim = SimSettings(zero_delay=zero_delay, time_scale=time_scale, seed=seed,
                      models={m.name: m.profile for m in BUILTIN_MODELS})
    return RouteLensConfig.model_validate({"fleet": {"instances": specs}, "sim": sim})
