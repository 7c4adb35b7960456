"""The Decisions search as data: URL parameters ⇄ :class:`SearchParams` → :class:`TraceFilter`, rows out.

Pure, no Streamlit. A query typed by the user is hashed here the way the gateway hashes it
(:func:`schemas.hashing.query_hash`, keyed when the configuration names ``router.hash_key_env``);
only the hash goes into the URL and the store's filter, never the text.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.ui.data.topology import NO_INSTANCE, NO_MODEL, NO_RULE
from app.units import DASH
from schemas.hashing import query_hash
from schemas.queries import UNSET_FIELDS, TraceFilter, TracePage, UnsetField
from schemas.trace import QUERY_HASH_PATTERN, DecisionTrace

__all__ = [
    "CONFIG_ENV", "MAX_TEXT", "OUTCOME_COLOURS", "PAGE_SIZE", "ROW_COLUMNS", "UNSET_LABELS", "URL_KEYS", "SearchParams",
    "describe", "hash_key", "hash_text", "key_note", "page_violations", "outcome_colour", "parse_search", "rows_frame",
    "scope_problems", "search_filter", "to_query", "unset_problems", "violations_of",
]

CONFIG_ENV = "ROUTELENS_CONFIG"  # the configuration whose router.hash_key_env names the HMAC key
DEFAULT_CONFIG = "routelens.yaml"
MAX_TEXT = 200
MAX_PAGES = 100
PAGE_SIZE = 50
# field -> URL parameter (the sidebar owns window, router_version, experiment_arm, model, instance)
URL_KEYS: dict[str, str] = {"rule": "rule", "fallback": "fallback", "outcome": "outcome", "min_ms": "min_ms",
                            "max_ms": "max_ms", "qhash": "qh", "violation": "violation", "unset": "unset",
                            "pages": "pages"}
ROW_COLUMNS: tuple[str, ...] = ("open", "ts", "outcome", "rule", "model", "instance", "arm", "fallback",
                                "violations", "http", "total_ms", "decision_ms", "cost", "request_id")
OUTCOME_COLOURS: dict[str, str] = {"ok": "#d4edda", "error": "#f8d7da", "fallback": "#fff3cd"}
_LABELS = {"rule": "rule", "fallback": "fallback", "outcome": "outcome", "min_ms": "min latency",
           "max_ms": "max latency", "qhash": "query hash", "violation": "violation", "unset": "empty",
           "pages": "page"}
# How an empty field reads: as Topology names the node that links here.
UNSET_LABELS: dict[UnsetField, str] = {"rule": NO_RULE, "model": NO_MODEL, "instance": NO_INSTANCE}
_UNSET_SAYS = {"rule": "without a rule", "model": "without a model", "instance": "not routed to an instance"}


class SearchParams(BaseModel):
    """The page's own filters (beyond the sidebar scope) and where in the result it is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: str | None = Field(None, min_length=1, max_length=MAX_TEXT)
    fallback: Literal["any", "yes", "no"] = "any"
    outcome: Literal["any", "ok", "error"] = "any"
    min_ms: float | None = Field(None, ge=0, allow_inf_nan=False)
    max_ms: float | None = Field(None, ge=0, allow_inf_nan=False)
    qhash: str | None = Field(None, pattern=QUERY_HASH_PATTERN)
    violation: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=MAX_TEXT,
                                  description="Decisions in which a candidate broke this constraint.")
    unset: list[UnsetField] = Field([], description="Fields the decision holds no value in (rule, model, instance).")
    pages: list[Annotated[str, Field(max_length=512)]] = Field(
        [], max_length=MAX_PAGES, description="The store cursors that led to this page (last: this page's)."
    )

    @property
    def cursor(self) -> str | None:
        """The store cursor of the page shown (None: the first page)."""
        return self.pages[-1] if self.pages else None


def parse_search(raw: Mapping[str, str]) -> tuple[SearchParams | None, list[str]]:
    """Validate the raw strings (widgets or URL, keyed by field name); ``(params, [])`` or ``(None, problems)``."""
    data: dict[str, object] = {k: v.strip() for k, v in raw.items() if k in URL_KEYS and v.strip()}
    for key in ("pages", "unset"):
        if key in data:
            data[key] = [c.strip() for c in str(data[key]).split(",") if c.strip()]
    try:
        params = SearchParams.model_validate(data)
    except ValidationError as exc:
        return None, [f"{_LABELS.get(str(e['loc'][0]), e['loc'][0])}: {_message(e)}" for e in exc.errors()]
    if params.min_ms is not None and params.max_ms is not None and params.min_ms > params.max_ms:
        return None, ["min latency is above max latency"]
    if params.rule is not None and "rule" in params.unset:
        return None, [f"rule: a rule is given and {NO_RULE} chosen too; clear one"]
    return params.model_copy(update={"unset": [n for n in UNSET_FIELDS if n in params.unset]}), []


def _message(error: Mapping[str, object]) -> str:
    kind = str(error["type"])
    if kind.startswith("float"):
        return "enter a number of milliseconds"
    if kind == "string_pattern_mismatch":
        return "not a query hash (sha256:<64 hex> or hmac-sha256:<64 hex>)"
    if kind == "literal_error":
        loc = error["loc"]
        offered = f" ({', '.join(UNSET_FIELDS)})" if isinstance(loc, tuple) and loc[:1] == ("unset",) else ""
        return "choose one of the offered values" + offered
    return str(error["msg"])


def to_query(params: SearchParams) -> dict[str, str]:
    """The URL parameters of ``params`` (defaults left out), keyed by parameter name."""
    out = {"rule": params.rule, "fallback": None if params.fallback == "any" else params.fallback,
           "outcome": None if params.outcome == "any" else params.outcome,
           "min_ms": _num(params.min_ms), "max_ms": _num(params.max_ms), "qhash": params.qhash,
           "violation": params.violation, "unset": ",".join(params.unset) or None,
           "pages": ",".join(params.pages) or None}
    return {URL_KEYS[k]: v for k, v in out.items() if v}


def _num(value: float | None) -> str | None:
    return None if value is None else f"{value:g}"


def search_filter(base: TraceFilter, params: SearchParams) -> TraceFilter:
    """The sidebar's filter narrowed by the page's own choices (validated: the outcome becomes its enum)."""
    return TraceFilter.model_validate({**base.model_dump(), **{
        "rule": params.rule, "fallback": None if params.fallback == "any" else params.fallback == "yes",
        "outcome": None if params.outcome == "any" else params.outcome, "query_hash": params.qhash,
        "min_latency_ms": params.min_ms, "max_latency_ms": params.max_ms, "violation": params.violation,
        "unset": params.unset or None,
    }})


def unset_problems(base: TraceFilter, params: SearchParams) -> list[str]:
    """An empty field chosen while the sidebar names a value for it (the store would refuse the filter)."""
    return [f"{UNSET_LABELS[n]} is chosen and the sidebar names {n} {getattr(base, n)!r}: clear one"
            for n in params.unset if n != "rule" and getattr(base, n) is not None]


def describe(params: SearchParams) -> str:
    """What the page's own choices select, said after "N decisions" (the violation, the empty fields)."""
    says = [f"in which a candidate broke {params.violation}"] if params.violation else []
    says += [_UNSET_SAYS[n] for n in params.unset]
    return " " + ", ".join(says) if says else ""


def scope_problems(flt: TraceFilter) -> list[str]:
    """Sidebar values too long to name anything (a 10 kB model name), as messages."""
    names = ("router_version", "experiment_arm", "model", "instance")
    return [f"{n.replace('_', ' ')}: at most {MAX_TEXT} characters" for n in names
            if len(getattr(flt, n) or "") > MAX_TEXT]


def hash_key(environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """``(key, variable name)``: the HMAC key the configuration's ``router.hash_key_env`` names, if set.

    The configuration is :data:`CONFIG_ENV`'s file, else ``routelens.yaml`` in the working folder;
    without one (or without the setting), queries are hashed without a key, as the gateway does.
    """
    env = os.environ if environ is None else environ
    path = Path(env.get(CONFIG_ENV, "").strip() or DEFAULT_CONFIG)
    if not path.is_file():
        return None, None
    from app.config import load_config

    try:
        name = load_config(path).router.hash_key_env
    except (OSError, ValueError):
        return None, None
    return (env.get(name) or None, name) if name else (None, None)


def hash_text(text: str, environ: Mapping[str, str] | None = None) -> str:
    """Hash a typed query exactly as the gateway does; the text itself is not kept."""
    return query_hash(text, hash_key(environ)[0])


def key_note(key: str | None, key_env: str | None, hashes: Sequence[str]) -> tuple[str, str]:
    """``(level, sentence)``: whether a typed query can match the stored hashes, judged by the hashes themselves.

    The gateway keys its hashes only when the variable is set where it runs; the traces say which it
    did (``hmac-sha256:`` or ``sha256:``). A key missing here matters only when the stored hashes are keyed.
    """
    keyed = [h.startswith("hmac-sha256:") for h in hashes]
    if key:
        if keyed and not any(keyed):
            return "warning", (f"Typed queries are hashed with the key in ${key_env}, but the traces here were "
                               "hashed without one (sha256:): unset it here to match them.")
        return "info", f"Typed queries are hashed with the HMAC key from ${key_env}, as the gateway hashes them."
    if keyed and any(keyed):
        where = f"${key_env} is not set here" if key_env else "the configuration names no router.hash_key_env"
        return "warning", (f"The traces here are keyed (hmac-sha256:) and {where}: typed queries will not match "
                           "them; search by a hash copied from a trace instead.")
    return "info", ("Typed queries are hashed without a key, as the traces here were (sha256:)." if keyed else
                    "Typed queries are hashed without a key" + (f" (${key_env} is not set here)." if key_env else "."))


def page_violations(
    search: Callable[[TraceFilter], Sequence[str]], flt: TraceFilter, page: TracePage, names: Iterable[str],
) -> dict[str, list[str]]:
    """Request id -> the constraints a candidate broke, for every row of ``page``, by one search per name.

    Each search is the page's own filter narrowed to the page's time span and one violation
    (``search`` returns the matching request ids); reading each row's trace instead costs a lookup
    per row. Names not among ``names`` (constraints not configured and not seen in the window) are
    not listed.
    """
    if not page.items:
        return {}
    lo, hi = min(s.ts for s in page.items), max(s.ts for s in page.items) + timedelta(microseconds=1)
    span = flt.model_copy(update={"start": max(lo, flt.start) if flt.start else lo,
                                  "end": min(hi, flt.end) if flt.end else hi})
    out: dict[str, list[str]] = {s.request_id: [] for s in page.items}
    for name in sorted(set(names)):
        for rid in search(span.model_copy(update={"violation": name})):
            if rid in out:
                out[rid].append(name)
    return out


def violations_of(trace: DecisionTrace) -> list[str]:
    """The constraints a candidate of this decision broke (hard: removed, soft: scaled), each once, by name."""
    return sorted({v.constraint for c in trace.candidates for v in c.violations})


def rows_frame(page: TracePage, violations: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """One row per summary, newest first; ``open`` links the drill-down (``trace?request_id=``).

    ``violations`` (request id -> constraint names, :func:`violations_of`) fills the column of that
    name; a row without an entry reads ``—`` (not read), one with none reads empty. Missing text
    (no rule, no arm) is ``—``; numbers stay numbers, so the table sorts on them.
    """
    rows = [{
        "open": "trace?request_id=" + urllib.parse.quote(s.request_id, safe=""), "request_id": s.request_id,
        "ts": s.ts, "rule": s.rule or DASH, "model": s.selected_model or DASH, "instance": s.selected_instance or DASH,
        "arm": s.experiment_arm or DASH, "fallback": "yes" if s.fallback_triggered else "",
        "violations": DASH if violations is None or s.request_id not in violations
        else ", ".join(violations[s.request_id]),
        "outcome": s.outcome_status.value, "http": s.http_status, "total_ms": s.total_ms,
        "decision_ms": s.latency_ms, "cost": s.cost,
    } for s in page.items]
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS))


def outcome_colour(value: object) -> str:
    """The cell style of an outcome (green ok, red error) or a fallback (amber)."""
    colour = OUTCOME_COLOURS.get("fallback" if value == "yes" else str(value))
    return f"background-color: {colour}" if colour else ""
