"""Rule-enhanced keyword scoring: the seed 003 §2.1 table, the config's validators, the joined regex."""

from __future__ import annotations

import random
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from router_core.rules.keywords import ASCII_CASE_TWINS, KeywordScorer, fold, literal_alternatives
from schemas.config.keywords import KeywordScoring
from schemas.fleet import InstanceSnapshot
from schemas.trace_policy import KeywordMatch

ROOT = Path(__file__).resolve().parents[3]
ANNUAL, PDF, TABLE = "(年报|财报|annual report)", "(PDF|扫描件|截图)", "(表格|数据|数字)"
NODE = "qwen-vl-node-01"


def snaps(*kv: float | None, stale: bool = False) -> dict[str, InstanceSnapshot]:
    return {
        f"{NODE}-{i}": InstanceSnapshot(instance=f"{NODE}-{i}", model="qwen-vl", kv_cache_usage=v, stale=stale)
        for i, v in enumerate(kv)
    }


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    score: float
    routed_to: str | None
    matches: tuple[tuple[str, float], ...] = ()
    intent: str | None = None
    confidence: float | None = None
    kv: tuple[float | None, ...] = (0.5,)
    raw: float | None = None
    bonus: float | None = None
    factor: float | None = None
    in_reason: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)


SEED = [
    Case("annual+pdf=5->vl", "帮我看一下这份年报的PDF", 5, "qwen-vl", ((ANNUAL, 3), (PDF, 2)),
         in_reason=(f"matched '{ANNUAL}' (+3) and '{PDF}' (+2)", "score 5 >= 5 -> qwen-vl")),
    Case("annual-only=3->llama", "今年的年报出来了吗", 3, "llama3-8b", ((ANNUAL, 3),),
         in_reason=("score 3 < 5 -> llama3-8b",)),
    Case("annual+finance-0.8=7->vl", "今年的年报出来了吗", 7, "qwen-vl", ((ANNUAL, 3),), "finance", 0.8,
         bonus=4, in_reason=("intent finance 0.80 > 0.7 (+4)",)),
    Case("same-under-kv-0.9=4.2->llama", "今年的年报出来了吗", 4.2, "llama3-8b", ((ANNUAL, 3),), "finance", 0.8,
         kv=(0.9,), raw=7, bonus=4, factor=0.6, in_reason=("kv_cache_usage 0.90 > 0.85 on qwen-vl (x0.6)",)),
    Case("finance-at-0.7-no-bonus", "今年的年报出来了吗", 3, "llama3-8b", ((ANNUAL, 3),), "finance", 0.7),
    Case("other-intent-no-bonus", "今年的年报出来了吗", 3, "llama3-8b", ((ANNUAL, 3),), "legal", 0.99),
    Case("all-three=6", "年报截图里的表格", 6, "qwen-vl", ((ANNUAL, 3), (PDF, 2), (TABLE, 1))),
    Case("english-case-insensitive", "Summarise the ANNUAL REPORT pdf", 5, "qwen-vl", ((ANNUAL, 3), (PDF, 2))),
    Case("nothing", "hello there", 0, "llama3-8b", in_reason=("no pattern matched",)),
    Case("kv-at-0.85-not-adjusted", "年报 PDF", 5, "qwen-vl", ((ANNUAL, 3), (PDF, 2)), kv=(0.85,),
         in_reason=("kv_cache_usage 0.85 <= 0.85 on qwen-vl: not load-adjusted",)),
    Case("kv-mean-over-instances", "年报 PDF", 5, "qwen-vl", ((ANNUAL, 3), (PDF, 2)), kv=(0.95, 0.5)),
    Case("kv-mean-above", "年报 PDF", 3, "llama3-8b", ((ANNUAL, 3), (PDF, 2)), kv=(0.95, 0.9), raw=5, factor=0.6),
    Case("kv-none-ignored-in-mean", "年报 PDF", 3, "llama3-8b", ((ANNUAL, 3), (PDF, 2)), kv=(0.9, None),
         raw=5, factor=0.6),
    Case("no-gauge-no-adjust", "年报 PDF", 5, "qwen-vl", ((ANNUAL, 3), (PDF, 2)), "finance", 0.1, kv=(None,),
         in_reason=("no kv_cache_usage for qwen-vl: not load-adjusted",)),
    Case("no-snapshot-no-adjust", "年报 PDF", 5, "qwen-vl", ((ANNUAL, 3), (PDF, 2)), kv=(),
         in_reason=("no kv_cache_usage for qwen-vl: not load-adjusted",)),
    Case("beyond-max-chars-ignored", "x" * 10 + "年报", 0, "llama3-8b", config={"max_chars": 10}),
    Case("no-otherwise-normal-routing", "年报", 3, None, ((ANNUAL, 3),), config={"otherwise": None},
         in_reason=("-> normal routing",)),
    Case("case-sensitive-flag", "pdf and PDF", 2, "llama3-8b", ((PDF, 2),),
         config={"patterns": [{"pattern": PDF, "weight": 2, "flags": ""}]}),
    Case("negative-weight", "年报 demo", 1, "llama3-8b", ((ANNUAL, 3), ("demo|test", -2)),
         config={"patterns": [{"pattern": ANNUAL, "weight": 3}, {"pattern": "demo|test", "weight": -2}]}),
    Case("decimal-weights-reach-threshold", "a b c", 0.3, "qwen-vl", (("a", 0.1), ("b", 0.2)),
         config={"threshold": 0.3, "patterns": [{"pattern": "a", "weight": 0.1}, {"pattern": "b", "weight": 0.2}]}),
]


def scorer(**overrides: Any) -> KeywordScorer:
    data = KeywordScoring.seed_example().model_dump()
    data.update(overrides)
    return KeywordScorer(KeywordScoring.model_validate(data))


@pytest.mark.parametrize("case", SEED, ids=[c.id for c in SEED])
def test_seed_table(case: Case) -> None:
    s = snaps(*case.kv)
    result = scorer(**case.config).score(
        case.text, intent=case.intent, intent_confidence=case.confidence, snapshots=s, instances_of_target=list(s))
    assert result.score == pytest.approx(case.score)
    assert result.raw == pytest.approx(case.score if case.raw is None else case.raw)
    assert result.routed_to == case.routed_to
    assert result.matches == tuple(KeywordMatch(pattern=p, weight=w) for p, w in case.matches)
    assert result.intent_bonus == case.bonus
    assert result.load_factor == case.factor
    for fragment in case.in_reason:
        assert fragment in result.reason
    assert "\n" not in result.reason


def test_reason_never_quotes_the_query() -> None:
    text = "机密客户名单 annual report"
    result = scorer().score(text, intent=None, intent_confidence=None, snapshots={}, instances_of_target=[])
    assert "机密" not in result.reason and "annual report" not in result.reason.replace(ANNUAL, "")


def test_stale_snapshot_is_no_data() -> None:
    s = snaps(0.99, stale=True)
    result = scorer().score("年报 PDF", intent=None, intent_confidence=None, snapshots=s, instances_of_target=list(s))
    assert (result.score, result.load_factor, result.load_value) == (5, None, None)


def test_only_target_instances_are_read() -> None:
    s = snaps(0.99) | {"llama-1": InstanceSnapshot(instance="llama-1", model="llama3-8b", kv_cache_usage=0.1)}
    result = scorer().score("年报 PDF", intent=None, intent_confidence=None, snapshots=s,
                            instances_of_target=[f"{NODE}-0"])
    assert result.load_value == pytest.approx(0.99) and result.load_factor == 0.6


def test_other_metric() -> None:
    s = {"a": InstanceSnapshot(instance="a", model="qwen-vl", queue=12)}
    result = scorer(load_adjust={"metric": "queue", "above": 10, "factor": 0.5}).score(
        "年报 PDF", intent=None, intent_confidence=None, snapshots=s, instances_of_target=["a"])
    assert (result.score, result.load_value) == (2.5, 12)


def test_seed_yaml_is_seed_example() -> None:
    data = yaml.safe_load((ROOT / "data/keywords/seed003.yaml").read_text(encoding="utf-8"))
    assert KeywordScoring.model_validate(data) == KeywordScoring.seed_example()


# --- validators -------------------------------------------------------------------------------

BAD = [
    ("bad-regex", {"patterns": [{"pattern": "(年报", "weight": 3}]}, "patterns.0.pattern", "missing ), unterminated"),
    ("second-bad-regex", {"patterns": [{"pattern": "ok", "weight": 1}, {"pattern": "[a-", "weight": 1}]},
     "patterns.1.pattern", "unterminated character set"),
    ("empty-match", {"patterns": [{"pattern": "x*", "weight": 1}]}, "patterns.0.pattern", "empty string"),
    ("inf-weight", {"patterns": [{"pattern": "x", "weight": float("inf")}]}, "patterns.0.weight", "finite"),
    ("nan-threshold", {"threshold": float("nan")}, "threshold", "finite"),
    ("bad-flag", {"patterns": [{"pattern": "x", "weight": 1, "flags": "ix"}]}, "patterns.0.flags", "pattern"),
    ("factor-zero", {"load_adjust": {"factor": 0}}, "load_adjust.factor", "greater than 0"),
    ("factor-above-one", {"load_adjust": {"factor": 1.5}}, "load_adjust.factor", "less than or equal to 1"),
    ("unknown-metric", {"load_adjust": {"metric": "gpu_util"}}, "load_adjust.metric", "kv_cache_usage"),
    ("confidence-above-one", {"intent_bonus": [{"intent": "finance", "min_confidence": 1.2}]},
     "intent_bonus.0.min_confidence", "less than or equal to 1"),
    ("duplicate-intent", {"intent_bonus": [{"intent": "finance"}, {"intent": "finance"}]}, "", "twice"),
    ("otherwise-is-target", {"otherwise": "qwen-vl"}, "", "must differ"),
    ("no-patterns", {"patterns": []}, "patterns", "at least 1"),
    ("unknown-key", {"patern": []}, "patern", "Extra inputs"),
]


@pytest.mark.parametrize(("overrides", "loc", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_config(overrides: dict[str, Any], loc: str, message: str) -> None:
    data = KeywordScoring.seed_example().model_dump() | overrides
    with pytest.raises(ValidationError) as info:
        KeywordScoring.model_validate(data)
    errors = info.value.errors()
    assert [".".join(map(str, e["loc"])) for e in errors] == [loc]
    assert message in str(info.value)


def test_defaults_are_the_seed() -> None:
    cfg = KeywordScoring.model_validate({
        "target": "qwen-vl", "patterns": [{"pattern": "x", "weight": 1}],
        "intent_bonus": [{"intent": "finance"}], "load_adjust": {}})
    assert cfg.threshold == 5 and cfg.patterns[0].flags == "i"
    assert (cfg.intent_bonus[0].min_confidence, cfg.intent_bonus[0].bonus) == (0.7, 4)
    assert (cfg.load_adjust is not None and
            (cfg.load_adjust.metric, cfg.load_adjust.above, cfg.load_adjust.factor) == ("kv_cache_usage", 0.85, 0.6))


# --- literal patterns by substring tests are exactly re.search ---------------------------------

ODD = [
    {"pattern": "(ab|k)", "weight": 1},           # literal, folded: 'K' (Kelvin) and 'K' match k
    {"pattern": "(?:is|年报)", "weight": 1},       # literal, folded: 'İ' and 'ı' match i, 'ſ' matches s
    {"pattern": "Ab", "weight": 1, "flags": ""},  # literal, case-sensitive
    {"pattern": "(a)|(b)c", "weight": 1},         # not literal: two groups
    {"pattern": r"(?<=c)d", "weight": 1},
    {"pattern": "^b", "weight": 1, "flags": "m"},
    {"pattern": r"(e)\1", "weight": 1},
    {"pattern": "σ|é", "weight": 1},              # cased non-ASCII: regex (folding would not be exact)
    {"pattern": r"\b(ab|is)\b", "weight": 1},     # literals rule out, the regex confirms the boundaries
]
ALPHABET = "abAB. kK\u212aisI\u0130\u0131\u017f年报cdeEσΣςé\n"


def _naive(patterns: list[dict[str, Any]], text: str) -> list[str]:
    out = []
    for p in patterns:
        flags = p.get("flags", "i")
        if re.search(p["pattern"], text, (re.I if "i" in flags else 0) | (re.M if "m" in flags else 0)):
            out.append(p["pattern"])
    return out


def test_literals_equal_re_search() -> None:
    s = KeywordScorer(KeywordScoring.model_validate({"target": "t", "patterns": ODD}))
    assert s.literal_patterns == 4
    rng = random.Random(16)
    for _ in range(5000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8)))
        got = s.score(text, intent=None, intent_confidence=None, snapshots={}, instances_of_target=[])
        assert [m.pattern for m in got.matches] == _naive(ODD, text), repr(text)


def test_seed_patterns_are_literal() -> None:
    assert KeywordScorer(KeywordScoring.seed_example()).literal_patterns == 3


LITERALS = [
    ("plain", "年报", True, (("年报",), True)),
    ("group", "(年报|Annual Report)", True, (("年报", "annual report"), True)),
    ("non-capturing", "(?:PDF|截图)", True, (("pdf", "截图"), True)),
    ("case-sensitive-kept", "(PDF|Pdf)", False, (("PDF", "Pdf"), True)),
    ("word-boundary-necessary-only", r"\b(ASAP|urgent)\b", True, (("asap", "urgent"), False)),
    ("escaped-backslash-b", r"\ba\\b", True, None),
    ("one-boundary", r"\basap", True, None),
    ("optional", "stack ?trace", True, None),
    ("two-groups", "(a)|(b)", True, None),
    ("cased-non-ascii", "(café)", True, None),
    ("cased-non-ascii-case-sensitive", "(café)", False, (("café",), True)),
    ("cjk-punctuation", "年报，", True, None),
]


@pytest.mark.parametrize(("pattern", "ignore_case", "expected"), [c[1:] for c in LITERALS],
                         ids=[c[0] for c in LITERALS])
def test_literal_alternatives(pattern: str, ignore_case: bool, expected: tuple[tuple[str, ...], bool] | None) -> None:
    assert literal_alternatives(pattern, ignore_case=ignore_case) == expected


def test_ascii_case_twins_are_the_engines() -> None:
    every = "".join(map(chr, range(128, sys.maxunicode + 1)))
    twins = {m.group(): m.group().lower() for m in re.finditer("[a-z]", every, re.I)}
    assert set(twins) == set(ASCII_CASE_TWINS)
    for twin, letter in ASCII_CASE_TWINS.items():
        assert re.fullmatch(letter, twin, re.I) and fold(twin) == letter
    # no character lower-cases into an uncased letter, so Lo literals fold only to themselves
    assert not [c for c in every if c.lower() != c and unicodedata.category(c.lower()[0]) == "Lo"]
