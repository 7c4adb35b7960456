import pytest

from router_core.resilience.answer_cache import AnswerCache
from router_core.resilience.degrade import cap_max_tokens, max_tokens_cap, shed_features
from schemas.config import RouteLensConfig
from schemas.config.economics import AnswerCacheSettings, DegradedSettings
from schemas.errors import ConfigError
from schemas.yamlconf import parse_yaml_model

SHED = [
    ({"messages": [], "logprobs": True, "top_logprobs": 5}, ["logprobs", "top_logprobs"]),
    ({"messages": [], "n": 3}, ["n"]),
    ({"messages": [], "best_of": 4, "use_beam_search": True}, ["best_of", "use_beam_search"]),
    ({"messages": [], "n": 1, "logprobs": False}, []),
]


@pytest.mark.parametrize(("body", "shed"), SHED, ids=[",".join(s) or "none" for _, s in SHED])
def test_shedding_drops_the_optional_features(body: dict, shed: list[str]) -> None:  # type: ignore[type-arg]
    out, names = shed_features(body)
    assert sorted(names) == sorted(shed) and not set(shed) & set(out) and out["messages"] == []


@pytest.mark.parametrize(("load", "cap"), [(0.0, 1024), (0.5, 544), (1.0, 64), (1.7, 64)])
def test_the_max_tokens_cap_falls_with_load(load: float, cap: int) -> None:
    assert max_tokens_cap(DegradedSettings(), load) == cap


def test_capping_max_tokens() -> None:
    assert cap_max_tokens({"max_tokens": 4000}, 512) == ({"max_tokens": 512}, True)
    assert cap_max_tokens({"max_tokens": 100}, 512) == ({"max_tokens": 100}, False)
    assert cap_max_tokens({}, 512) == ({"max_tokens": 512}, True)


def test_the_answer_cache_is_off_by_default() -> None:
    cache = AnswerCache(AnswerCacheSettings())
    assert not cache.is_enabled and cache.key("auto", "hello") is None
    cfg = RouteLensConfig.model_validate({"fleet": {"instances": [{"id": "a", "model": "m", "url": "http://x"}]}})
    assert cfg.economics.degraded.cache.enabled is False


def test_the_answer_cache_normalises_keys_and_expires() -> None:
    now = [0.0]
    cache = AnswerCache(AnswerCacheSettings(enabled=True, ttl_s=10, max_entries=2), clock=lambda: now[0])
    key = cache.key("auto", "Hello   World")
    assert key is not None and key == cache.key("auto", "hello world") != cache.key("m", "hello world")
    cache.put(key, b"{}", "application/json")
    assert cache.get(key) == (b"{}", "application/json")
    now[0] = 11
    assert cache.get(key) is None and len(cache) == 0


GOOD = "fleet:\n  instances:\n    - {id: a, model: m, url: 'http://127.0.0.1:1'}\neconomics:\n  degraded:\n"


@pytest.mark.parametrize(("text", "message"), [
    ("    steps: [shed_features, pray]\n", "Input should be 'shed_features'"),
    ("    steps: [reject, cache]\n", "reject must be the last step"),
    ("    steps: [responder, reject]\n", "the responder step needs degraded.responder"),
])
def test_a_bad_degraded_section_fails_at_load_with_file_line_and_field(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, GOOD + text, "d.yaml")
    assert "d.yaml:" in str(info.value) and "economics.degraded" in str(info.value), str(info.value)
    assert message in str(info.value), str(info.value)
