"""A misroute made into a regression case: a policy test case, or a labelled example of an intent route.

An operator who finds a misrouted decision ("Why this model") says where it should have gone. That
becomes, in a file the operator chooses, either a case of the policy's ``tests:`` (the request's
features from the trace, the expected rule and target), which ``routelens policy test`` runs, or
an utterance of an intent route (the query as the operator typed it, checked against the trace's
query hash: the store never held it). The change is inserted as text, so the file's comments and
order stay as they were, and it is returned as a :class:`Change` (before, after, unified diff) to
review before :func:`write`. A policy change is compiled before it is offered: a case the policy
file cannot load is refused, never written.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from router_core import CaseResult, compile_policy, run_cases
from schemas.config import RouteLensConfig
from schemas.policy_file import CaseExpect, CaseRequest, PolicyCase
from schemas.trace import DecisionTrace

__all__ = ["Change", "append_intent_example", "append_policy_case", "case_from_trace", "check_case", "write"]

_TOP_KEY = re.compile(r"^[^\s#-][^:]*:")  # a top-level mapping key (column 0)


@dataclass(frozen=True, slots=True)
class Change:
    """One file's proposed new text."""

    path: Path
    before: str
    after: str

    @property
    def diff(self) -> str:
        """The change as a unified diff (what a reviewer reads)."""
        name = str(self.path)
        return "".join(difflib.unified_diff(self.before.splitlines(keepends=True), self.after.splitlines(keepends=True),
                                            fromfile=f"a/{name}", tofile=f"b/{name}"))


def case_from_trace(trace: DecisionTrace, *, name: str, rule: str | None, target: str | None,
                    prompt: str | None = None, query_length: int | None = None) -> PolicyCase:
    """The policy test case of a traced request: its features as the rules read them, and what was expected.

    Args:
        trace: The misrouted decision.
        name: The case's name.
        rule: The rule that should have matched (None: none should have).
        target: That rule's primary target the request should have gone to (ignored without a rule:
            a case tests rules; the model is in the feedback).
        prompt: The query, when the operator typed it (conditions such as ``prompt_contains`` read it).
        query_length: Its estimated tokens (default: the whole input's).
    """
    feats, step = trace.features, trace.policy
    request = CaseRequest(
        input_length=feats.est_input_tokens, query_length=query_length, language=feats.language.value,
        intent=trace.intent, intent_confidence=trace.intent_confidence, file_types=list(feats.file_types),
        has_attachments=feats.has_attachments, request_time=trace.ts, prompt=prompt or "",
        keyword_score=None if step is None else step.keyword_score,
    )
    expect = CaseExpect(rule=rule, target=target) if rule is not None and target else CaseExpect(rule=rule)
    return PolicyCase(name=name, request=request, expect=expect)


def _flow(value: Any) -> str:
    """``value`` as one line of YAML (a scalar's document-end marker dropped)."""
    out = str(yaml.safe_dump(value, default_flow_style=True, width=1 << 20, allow_unicode=True, sort_keys=False))
    return out.removesuffix("\n...\n").strip()


def _case_lines(case: PolicyCase, indent: str) -> list[str]:
    request = case.request.model_dump(mode="json", exclude_defaults=True)
    if "request_time" not in request:
        request["request_time"] = case.request.request_time.isoformat()
    expect = case.expect.model_dump(mode="json", exclude_unset=True)
    expect.setdefault("rule", None)
    return [f"{indent}- name: {_flow(case.name)}\n", f"{indent}  request: {_flow(request)}\n",
            f"{indent}  expect: {_flow(expect)}\n"]


def _insert_item(text: str, key: str, render: Any) -> str:
    """Insert a list item at the end of the top-level ``key:`` block (created at the end when missing).

    ``render(indent)`` gives the item's lines at the block's indent.
    """
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    start = next((i for i, line in enumerate(lines) if re.match(rf"^{re.escape(key)}:\s*(\[\s*\])?\s*(#.*)?$", line)),
                 None)
    if start is None:
        return "".join([*lines, *(["\n"] if lines and lines[-1].strip() else []), f"{key}:\n", *render("  ")])
    if "[" in lines[start].split("#")[0]:  # `key: []`: the block starts empty
        lines[start] = f"{key}:\n"
    end = next((i for i in range(start + 1, len(lines)) if _TOP_KEY.match(lines[i])), len(lines))
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1  # blank lines and comments before the next key stay with it
    first = next((line for line in lines[start + 1:end] if line.strip() and not line.lstrip().startswith("#")), None)
    indent = "  " if first is None else first[: len(first) - len(first.lstrip())]
    return "".join([*lines[:end], *render(indent), *lines[end:]])


def append_policy_case(path: str | Path, case: PolicyCase, config: RouteLensConfig) -> Change:
    """The policy file at ``path`` with ``case`` appended to its ``tests:``, compiled to prove it loads.

    Raises:
        PolicyError: The file does not compile with the case (nothing is written).
        OSError: It cannot be read.
    """
    p = Path(path)
    before = p.read_text(encoding="utf-8")
    had = len(compile_policy(before, str(p), config).cases)
    after = _insert_item(before, "tests", lambda indent: _case_lines(case, indent))
    rules = compile_policy(after, str(p), config)
    if len(rules.cases) != had + 1 or rules.cases[-1] != case:
        raise ValueError(f"{p}: the case did not land at the end of its tests (is tests: a top-level list?)")
    return Change(p, before, after)


def append_intent_example(path: str | Path, route: str, text: str) -> Change:
    """The routes file at ``path`` (``route: [utterances]``) with ``text`` added to ``route``'s examples.

    Raises:
        ValueError: The file is not a mapping of routes to lists, has no route ``route`` (a route of
            one example would make the file one the classifier refuses), or the result does not read back.
        OSError: It cannot be read.
    """
    p = Path(path)
    before = p.read_text(encoding="utf-8")
    routes = yaml.safe_load(before) or {}
    if not isinstance(routes, dict) or not all(isinstance(v, list) for v in routes.values()):
        raise ValueError(f"{p}: not a file of `route: [utterances]`")
    if route not in routes:  # one example would be a route the classifier refuses (it needs two)
        raise ValueError(f"{p} has no route {route!r}; a new route needs at least two examples: "
                         f"`routelens intents add {route} FILE` with them")
    item = _flow(text)
    after = _insert_item(before, route, lambda indent: [f"{indent}- {item}\n"])
    got = yaml.safe_load(after)
    now = got.get(route) if isinstance(got, dict) else None
    others = {k: v for k, v in routes.items() if k != route}
    if not isinstance(now, list) or now != [*routes.get(route, []), text] or {
            k: v for k, v in got.items() if k != route} != others:
        raise ValueError(f"{p}: the example did not land in {route!r} (is it a block list?)")
    return Change(p, before, after)


def check_case(change: Change, name: str, config: RouteLensConfig) -> CaseResult:
    """Run the case called ``name`` of a policy ``change`` against that file's rules."""
    rules = compile_policy(change.after, str(change.path), config)
    case = next(c for c in rules.cases if c.name == name)
    (result,) = run_cases(rules, [case])
    return result


def write(change: Change) -> None:
    """Write the change, if the file still holds what it was made from.

    Raises:
        RuntimeError: The file changed since (the change is not applied: make it again).
    """
    if change.path.read_text(encoding="utf-8") != change.before:
        raise RuntimeError(f"{change.path} changed since this change was made; make it again")
    change.path.write_text(change.after, encoding="utf-8")
