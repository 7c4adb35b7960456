"""attachment-filter: the instance's model must accept every (byte-detected) type of the request's attachments."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from router_core.decide.decision import DecisionContext
from schemas.trace import RequestFeatures
from tests.router_core.conftest import NOW, decide, features, healthy
from tests.router_core.plugin_kit import (
    BadParams,
    assert_filter_step,
    assert_refused,
    build,
    candidate,
    plugins_config,
    step,
)

TYPE = "attachment-filter"
ACCEPT = {"pdf-only": ["pdf"], "vision": ["png", "JPEG"], "docs": ["pdf", "docx", "txt"]}


def with_types(*types: str) -> RequestFeatures:
    return features().model_copy(update={"file_types": list(types), "has_attachments": bool(types)})


def context(*types: str) -> DecisionContext:
    return DecisionContext(request_id="r1", features=with_types(*types), intent=None, now=NOW, quality={})


@dataclass(frozen=True)
class Case:
    id: str
    model: str
    types: tuple[str, ...]
    reason: str | None  # None: kept


CASES = [
    Case("word-file-to-a-pdf-only-model", "pdf-only", ("docx",), "model pdf-only does not accept docx (accepts: pdf)"),
    Case("word-file-to-a-docs-model", "docs", ("docx",), None),
    Case("model-left-out-accepts-all", "anything", ("docx", "zip"), None),
    Case("every-type-must-be-accepted", "docs", ("pdf", "png", "docx"),
         "model docs does not accept png (accepts: docx, pdf, txt)"),
    Case("aliases-folded", "vision", ("jpg", "png"), None),
    Case("unknown-bytes", "vision", ("unknown",), "model vision does not accept unknown (accepts: jpg, png)"),
    Case("no-attachments", "pdf-only", (), None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_check(case: Case) -> None:
    flt = build(TYPE, accept=ACCEPT)
    assert flt.name == "attachment"
    v = flt.check(candidate(model=case.model), context(*case.types))
    if case.reason is None:
        assert v is None
        return
    assert v is not None
    assert (v.constraint, v.metric, v.op, v.value, v.severity, v.reason) == (
        "attachment", "file_type", "in", None, "hard", case.reason)


def test_no_accept_map_passes_everything() -> None:
    assert build(TYPE).check(candidate(model="m"), context("docx")) is None


BAD = [
    BadParams("unknown-parameter", {"types": ["pdf"]}, "types"),
    BadParams("accept-is-a-map", {"accept": ["pdf"]}, "accept"),
]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_parameters(case: BadParams) -> None:
    assert_refused(TYPE, case)


ROUTING = {"routing": {"attachments": {"accept": {"small": ["pdf"], "big": ["pdf", "docx"]}}}}


def test_routing_attachments_accept_puts_it_in_the_default_pipeline() -> None:
    cfg = plugins_config(None, sections=ROUTING)
    # healthy(): big-a, big-b (model big), small-a (model small accepts only pdf)
    ranked, trace = decide(healthy(), cfg, feats=with_types("docx"))
    assert sorted(ranked) == ["big-a", "big-b"]
    assert_filter_step(trace, "attachment", TYPE, kept=2, rejected=["small-a"])
    (small,) = [c for c in trace.candidates if c.instance == "small-a"]
    assert [v.reason for v in small.violations] == ["model small does not accept docx (accepts: pdf)"]

    ranked, trace = decide(healthy(), cfg, feats=features())  # no attachments: all kept
    assert sorted(ranked) == ["big-a", "big-b", "small-a"]
    assert_filter_step(trace, "attachment", TYPE, kept=3, rejected=[])


def test_without_an_accept_map_it_is_not_built() -> None:
    _, trace = decide(healthy(), plugins_config(None), feats=with_types("docx"))
    with pytest.raises(ValueError):
        step(trace, "filter/attachment")
