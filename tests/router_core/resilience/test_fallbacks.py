"""Typed fallbacks: error classes, next targets per step, and the resilience section's load errors."""

from __future__ import annotations

import pytest

from router_core.resilience.fallbacks import classify, next_target
from schemas.common import AttemptStatus
from schemas.config import RouteLensConfig
from schemas.config.resilience import ResilienceSettings
from schemas.errors import ConfigError
from schemas.fleet import InstanceSpec
from schemas.yamlconf import parse_yaml_model

CLASSES = [
    (AttemptStatus.CONNECT_ERROR, None, False, b"", "connect"),
    (AttemptStatus.TIMEOUT, None, False, b"", "timeout"),
    (AttemptStatus.TIMEOUT, None, True, b"", "first_byte"),
    (AttemptStatus.HTTP_ERROR, 429, False, b"", "http_429"),
    (AttemptStatus.HTTP_ERROR, 503, False, b"", "http_5xx"),
    (AttemptStatus.HTTP_ERROR, 400, False, b'{"error": {"message": "maximum context length is 4096"}}',
     "context_overflow"),
    (AttemptStatus.HTTP_ERROR, 400, False, b'{"error": {"code": "content_filter"}}', "content_filter"),
    (AttemptStatus.HTTP_ERROR, 400, False, b'{"error": "bad temperature"}', None),
    (AttemptStatus.OK, 200, False, b"", None),
]


@pytest.mark.parametrize(("status", "http", "stream", "body", "cls"), CLASSES, ids=[str(c[4]) for c in CLASSES])
def test_classify(status: AttemptStatus, http: int | None, stream: bool, body: bytes, cls: str | None) -> None:
    assert classify(status, http, stream, body) == cls


SPECS = [InstanceSpec(id=i, model=m, url=f"http://{i}") for i, m in (("a1", "a"), ("a2", "a"), ("b1", "b"))]
STEPS = [
    (("any",), {"a1"}, "a2"),
    (("same_model",), {"a1"}, "a2"),
    (("other_model",), {"a1"}, "b1"),
    (("same_instance",), {"a1"}, "a1"),
    (("same_model", "other_model"), {"a1", "a2"}, "b1"),  # none left of a: the next step
    (("same_model",), {"a1", "a2"}, None),
    ((), {"a1"}, None),
]


@pytest.mark.parametrize(("steps", "tried", "expected"), STEPS, ids=[f"{'+'.join(s[0])}-{s[2]}" for s in STEPS])
def test_next_target(steps: tuple[str, ...], tried: set[str], expected: str | None) -> None:
    last = next(s for s in SPECS if s.id == sorted(tried)[-1]) if tried else None
    got, _ = next_target(SPECS, tried, last, steps, None)  # type: ignore[arg-type]
    assert (got.id if got else None) == expected


def test_rule_for_follows_like_and_keeps_todays_defaults() -> None:
    res = ResilienceSettings.model_validate({"fallbacks": {"timeout": {"backoff_ms": 50, "next": ["same_model"]},
                                                           "first_byte": {"like": "timeout"}}})
    assert res.rule_for("first_byte") == (0.05, ("same_model",))
    assert res.rule_for("http_5xx") == (0.0, ("any",))
    assert res.rule_for("context_overflow") == (0.0, ())


GOOD = "fleet:\n  instances:\n    - {id: a, model: m, url: 'http://x'}\nresilience:\n"
BAD = [
    ("  fallbacks:\n    timeout: {like: timeout}\n", 6, "resilience.fallbacks", "refers to itself"),
    ("  fallbacks:\n    timeout: {like: connect}\n    connect: {like: timeout}\n", 6, "resilience.fallbacks",
     "timeout -> connect -> timeout"),
    ("  fallbacks:\n    smell: {next: [any]}\n", 6, "resilience.fallbacks.smell.[key]", "Input should be"),
    ("  fallbacks:\n    timeout: {next: [elsewhere]}\n", 6, "resilience.fallbacks.timeout.next[0]", "Input should be"),
    ("  fallbacks:\n    timeout: {backoff_ms: -1}\n", 6, "resilience.fallbacks.timeout.backoff_ms", "greater than"),
    ("  breakers:\n    model: {threshold: 1.5}\n", 6, "resilience.breakers.model.threshold", "less than"),
    ("  breakers:\n    instance: {consecutive_failures: 0}\n", 6,
     "resilience.breakers.instance.consecutive_failures", "greater than"),
    ("  deadline_s: 0\n", 5, "resilience.deadline_s", "greater than"),
]


@pytest.mark.parametrize(("text", "line", "field", "message"), BAD, ids=[b[2] for b in BAD])
def test_bad_resilience_sections_name_file_line_and_field(text: str, line: int, field: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, GOOD + text, "c.yaml")
    assert f"c.yaml:{line}: {field}:" in str(info.value) and message in str(info.value), str(info.value)
