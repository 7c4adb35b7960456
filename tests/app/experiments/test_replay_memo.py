"""The decision memo: memoised and unmemoised replay decide alike on varied traces; its key moves with each input."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from app.experiments import bulk
from app.experiments.replay_memo import MemoReplayer, memo_allowed
from app.experiments.replayer import Replayed, Replayer
from app.experiments.rows import ReplayRow
from bench.replay_traces import MODELS, fleet_config
from router_core.decide.builtin import builtin_registry
from router_core.decide.decision import DecisionContext
from router_core.decide.policy import build_policy
from router_core.framework import Candidate
from schemas.config import RouteLensConfig
from schemas.fleet import InstanceSnapshot
from schemas.queries import TraceFilter
from schemas.trace import DecisionTrace, RequestFeatures
from tests.app.experiments.seed import STATE_ONLY, T0, decided, store_traces

BAN = {"name": "ban-qwen", "metric": "queue", "op": "<=", "threshold": -1, "models": ["qwen-72b"]}
TIGHT = [{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.3},
         {"name": "queue", "metric": "queue", "threshold": 2}]
# Small windows on two instances: the context-window verdicts vary from request to request.
WINDOWS = fleet_config().model_dump()["fleet"]
for k in (1, 4):
    WINDOWS["instances"][k]["context_window"] = 900
ZEROED = {"quality": 0.0, "latency": 0.0, "balance": 0.0}

POLICIES: dict[str, RouteLensConfig] = {
    "same": fleet_config(),
    "state-only": fleet_config(scoring=STATE_ONLY),
    "dropped-model": fleet_config(drop_model="qwen-72b"),
    "ban-constraint": fleet_config(constraints=[BAN]),
    "tight-reject": fleet_config(constraints=TIGHT, router={"on_empty": "reject"}),
    "tight-fallback": fleet_config(constraints=TIGHT, router={"fallback_model": "qwen-72b"}),
    "p2c": fleet_config(router={"picker": "p2c"}),
    "softmax": fleet_config(router={"picker": "softmax"}),
    "hour-profiles": fleet_config(scoring={"preset": "balanced", "profiles": [
        {"name": "night", "hours": [22, 6], "weights": {"quality": 0.0, "latency": 0.9}},
        {"name": "noon", "hours": [12, 14], "weights": {"cost": 0.9}}]}),
    "small-windows": fleet_config(fleet=WINDOWS),
    # The cost term alone: instances of one model tie exactly, and the request id breaks the ties.
    "cost-ties": fleet_config(scoring={"preset": "balanced", "weights": {**ZEROED, "cost": 1.0}}),
    "smaller-fleet": fleet_config(4),
}


def _varied() -> list[DecisionTrace]:
    """Traces over four hours and two days, rounds of 4 to 40 requests, many explicit models, ageing state."""
    out: list[DecisionTrace] = []
    for k, hour in enumerate((0, 7, 13, 23, 24 + 13)):
        out += decided(160, fleet_config(), seed=k, start=T0 + timedelta(hours=hour), round_every=4 + 9 * k,
                       explicit_share=0.4)
    # A scrape round every 8 requests a second apart: later rows of a round see suspect, then stale state.
    out += decided(96, fleet_config(), seed=11, start=T0 + timedelta(hours=5), step=timedelta(seconds=1),
                   round_every=8)
    return out


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[ReplayRow]:
    path = store_traces(tmp_path_factory.mktemp("memo") / "traces.duckdb", _varied())
    con = bulk.open_file(path)
    try:
        return [r for batch in bulk.read_rows(con, TraceFilter(start=T0, end=T0 + timedelta(days=3)), 256)
                for r in batch]
    finally:
        con.close()


def _view(got: Replayed, replayer: Replayer) -> tuple[Any, ...]:
    """Everything a tally reads of a decision."""
    return (got.rule, got.instance, got.model, dict(got.weights), dict(got.removed), got.note, list(got.known),
            got.terms, replayer.latency_of(got.instance, got))


@pytest.mark.parametrize("name", list(POLICIES))
def test_memoised_and_unmemoised_replay_decide_alike(name: str, rows: list[ReplayRow]) -> None:
    assert len(rows) == 5 * 160 + 96
    plain = Replayer(build_policy(POLICIES[name], builtin_registry()))
    memo = MemoReplayer(build_policy(POLICIES[name], builtin_registry()), max_entries=64)
    assert memo.enabled
    differ = [(row.request_id, _view(memo.decide(row), memo), want)
              for row in rows if _view(memo.decide(row), memo) != (want := _view(plain.decide(row), plain))]
    assert differ == []
    assert memo.hits >= 100 and memo.misses > 0  # the memo was used, and not for everything


def test_a_tie_picks_by_request_id_on_a_memo_hit(rows: list[ReplayRow]) -> None:
    memo = MemoReplayer(build_policy(POLICIES["cost-ties"], builtin_registry()))

    def tied(row: ReplayRow) -> bool:
        scored = memo.rank(memo.context(row), memo.state_for(row))[1] or []
        return sum(t == max(t for _, t in scored) for _, t in scored) > 1

    row = next(r for r in rows if tied(r))
    picks = {memo.decide(dataclasses.replace(row, request_id=f"req-{k}")).instance for k in range(40)}
    assert memo.hits == 39 and len(picks) > 1  # one entry, and the tie went more than one way


class _ReadsTokens:
    """A scorer outside the memo's knowledge: it reads the request's features."""

    TYPE = "tokens-scorer"
    STATE_ONLY = False
    name = "quality"

    def score(self, pool: Sequence[Candidate], ctx: DecisionContext) -> list[float]:
        return [1.0 / (1 + ctx.features.est_input_tokens) for _ in pool]


def test_a_policy_weighting_an_unknown_request_reading_scorer_is_not_memoised(rows: list[ReplayRow]) -> None:
    policy = build_policy(fleet_config(), builtin_registry())
    assert memo_allowed(policy)
    policy.scorers["quality"] = _ReadsTokens()  # type: ignore[assignment]
    memo = MemoReplayer(policy)
    assert not memo_allowed(policy) and not memo.enabled
    memo.decide(rows[0])
    memo.decide(rows[1])
    assert (memo.hits, memo.misses) == (0, 2)


def _ctx(model: str = "auto", tokens: int = 100, **kw: Any) -> DecisionContext:
    features = RequestFeatures(requested_model=model, n_messages=1, input_chars=tokens * 4, est_input_tokens=tokens,
                               analysed_chars=tokens * 4)
    return DecisionContext(request_id=kw.pop("request_id", "r1"), features=features, intent=kw.pop("intent", "code"),
                           now=kw.pop("now", T0), quality=kw.pop("quality", {}), **kw)


def test_the_memo_key_changes_when_any_of_its_inputs_changes() -> None:
    memo = MemoReplayer(build_policy(fleet_config(fleet=WINDOWS), builtin_registry()))  # balanced: reads quality
    table: dict[tuple[str, str], float] = {}
    snaps = [InstanceSnapshot(instance=s.id, model=s.model, scraped_at=T0, queue=1.0, kv_cache_usage=0.2)
             for s in memo.policy.fleet]
    base = memo.key(_ctx(quality=table), snaps)
    assert memo.key(_ctx(quality=table), snaps) == base
    assert memo.key(_ctx(quality=table, request_id="r2", now=T0 + timedelta(minutes=59)), snaps) == base
    changed = {
        "model": memo.key(_ctx(MODELS[2], quality=table), snaps),
        "hour": memo.key(_ctx(quality=table, now=T0 + timedelta(hours=1)), snaps),
        "intent": memo.key(_ctx(quality=table, intent="chat"), snaps),
        "quality table": memo.key(_ctx(quality=dict(table)), snaps),
        "a snapshot": memo.key(_ctx(quality=table), [*snaps[:3], snaps[3].model_copy(), *snaps[4:]]),
        "snapshot order": memo.key(_ctx(quality=table), snaps[::-1]),
    }
    assert [k for k, v in changed.items() if v == base] == []
    ctx = _ctx(quality=table)
    got, _ = memo.rank(ctx, {s.instance: s for s in snaps})
    cands = [p.candidate for p in got.prepared.values()]
    fits = memo.verdicts(ctx, cands)
    assert fits == () and memo.verdicts(_ctx(tokens=850, quality=table), cands) == ()
    too_long = memo.verdicts(_ctx(tokens=1000, quality=table), cands)
    assert [(i, j) for i, j, *_ in too_long] == [(0, 1), (0, 4)]  # the two small windows, nothing else


def test_state_only_scoring_keys_no_intent() -> None:
    memo = MemoReplayer(build_policy(fleet_config(scoring=STATE_ONLY), builtin_registry()))
    snaps = [InstanceSnapshot(instance=s.id, model=s.model, scraped_at=T0) for s in memo.policy.fleet]
    assert memo.key(_ctx(intent="code"), snaps) == memo.key(_ctx(intent="chat", quality={("x", "y"): 1.0}), snaps)

