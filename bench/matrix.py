"""What a 50-rule routing matrix adds to ``decide()``, and the whole request analysis on the fast path.

The matrix: 50 rules (two-atom conditions, one with a prompt test), a request that matches none of
them and one that matches the last; the rule index (:mod:`router_core.rules.index`) rules most of
them out from three lookups. ``unindexed``: 50 rules no index can rule out (a negation and a prompt
test each), a request matching none, so every closure runs: the worst case. Timed: ``match`` plus
``decide`` against ``decide`` alone, interleaved, on an 8-instance fleet, with the garbage collector
tuned as the gateway tunes it; ``matrix_<case>_match_*`` is the match (and its ``RouteChoice``) alone,
timed inside the same loop, since a difference of two p99s carries the noise of both. The analysis: parsing the
chat body's features (``analyse_request``), the fast intent path, and the match, per request.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from typing import Any

N_RULES = 50


def _p(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 4)


def _matrix(n: int) -> str:
    rules = []
    for i in range(n - 1):
        rules.append(f'  - {{rule_name: r{i}, condition: "input_length > {20_000 + i} && '
                     f'prompt_contains(\'kw{i}\') || metadata.tier == \'t{i}\'", primary_target: m{i % 4}}}\n')
    rules.append(f'  - {{rule_name: last, condition: "language == \'zh\' && request_time.hour in [1,2,3]", '
                 f'primary_target: m{(n - 1) % 4}, fallback_chain: [m{n % 4}]}}\n')
    return "routing_matrix:\n" + "".join(rules)


def _unindexed(n: int) -> str:
    """``n`` rules the index cannot rule out (a negation and a prompt test): every closure runs."""
    rules = [f'  - {{rule_name: u{i}, condition: "!(metadata.tier == \'t{i}\') && prompt_contains(\'kw{i}\')", '
             f'primary_target: m{i % 4}}}\n' for i in range(n)]
    return "routing_matrix:\n" + "".join(rules)


def matrix_figures(iterations: int = 4000, seed: int = 3) -> dict[str, Any]:
    """p50/p99 of decide() alone and with a 50-rule match before it; what the matrix adds; the match alone."""
    from app.run.gc_tuning import tame_gc
    from router_core.decide.builtin import build_router
    from router_core.decide.decision import DecisionContext
    from router_core.rules.load import compile_policy
    from router_core.rules.request import RequestView
    from router_core.rules.route import RouteChoice
    from router_core.state.quality import QualityTable
    from schemas import InstanceSnapshot, RequestFeatures
    from schemas.config import RouteLensConfig

    rng = random.Random(seed)
    now = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    config = RouteLensConfig.model_validate({"fleet": {"instances": [
        {"id": f"i{i}", "model": f"m{i % 4}", "url": f"http://127.0.0.1:{21000 + i}"} for i in range(8)]},
        "scoring": {"preset": "balanced"}})
    rules = compile_policy(_matrix(N_RULES), "bench.yaml", config)
    unindexed = compile_policy(_unindexed(N_RULES), "bench-unindexed.yaml", config)
    router = build_router(config)
    state = {s.id: InstanceSnapshot(instance=s.id, model=s.model, scraped_at=now, kv_cache_usage=rng.random() * 0.7,
                                    queue=rng.randint(0, 4), running=rng.randint(0, 4)) for s in config.fleet.instances}
    feats = RequestFeatures(requested_model="auto", n_messages=1, input_chars=400, est_input_tokens=100)
    quality = QualityTable(config.models).snapshot()
    prompt = "请帮我看看这个账户的问题 " * 8
    views = {lang: RequestView(input_length=100, query_length=100, language=lang, intent="chat",
                               intent_confidence=0.5, file_types=(), has_attachments=False, request_time=now,
                               metadata={"tier": "gold"}, prompt=prompt) for lang in ("en", "zh")}
    tame_gc()  # as the gateway runs (app.run.gc_tuning): start-up objects frozen, young-generation thresholds raised
    plain: list[float] = []
    cases = (("none", rules, "en"), ("last", rules, "zh"), ("unindexed", unindexed, "en"))
    with_rules: dict[str, list[float]] = {case: [] for case, _, _ in cases}
    match_only: dict[str, list[float]] = {case: [] for case, _, _ in cases}
    for i in range(iterations):
        rid = f"r{i}"
        t0 = time.perf_counter()
        router.decide(DecisionContext(rid, feats, "chat", now, quality), state)
        plain.append((time.perf_counter() - t0) * 1e3)
        for case, ruleset, lang in cases:
            view = RequestView(**{f: getattr(views[lang], f) for f in (
                "input_length", "query_length", "language", "intent", "intent_confidence", "file_types",
                "has_attachments", "request_time", "metadata", "prompt")})  # a fresh view: no fold cached
            t0 = time.perf_counter()
            choice = RouteChoice(ruleset, ruleset.match(view), local_hour=now.hour)
            t1 = time.perf_counter()
            d = router.decide(DecisionContext(rid, feats, "chat", now, quality, route=choice), state)
            with_rules[case].append((time.perf_counter() - t0) * 1e3)
            match_only[case].append((t1 - t0) * 1e3)
            assert (d.rule == "last") == (case == "last"), d.rule
    out: dict[str, Any] = {"matrix_rules": N_RULES, "decide_p50_ms": _p(plain, 0.5), "decide_p99_ms": _p(plain, 0.99)}
    for case, xs in with_rules.items():
        out[f"matrix_{case}_p50_ms"] = _p(xs, 0.5)
        out[f"matrix_{case}_p99_ms"] = _p(xs, 0.99)
        out[f"matrix_{case}_added_p99_ms"] = round(_p(xs, 0.99) - _p(plain, 0.99), 4)
        out[f"matrix_{case}_added_p50_ms"] = round(_p(xs, 0.5) - _p(plain, 0.5), 4)
        out[f"matrix_{case}_match_p50_ms"] = _p(match_only[case], 0.5)
        out[f"matrix_{case}_match_p99_ms"] = _p(match_only[case], 0.99)
    return out
