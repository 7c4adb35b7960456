"""``routelens policy check|test|explain FILE``: a routing policy validated, tested, explained.

``check`` compiles FILE against ``--config``'s fleet: exit 0 and a one-line summary, or exit 2 and
one ``FILE:LINE:COL: message`` line per problem (on stdout, as linters print). ``test`` runs the
file's own ``tests:`` cases (exit 0 all pass, 1 some fail, 2 it does not load). ``explain FILE
--request JSON`` shows which rules were tried and why the first match matched; JSON is either a
chat-completions body (analysed as the gateway would) or a case's features
(``{"input_length": 9000, "prompt": "...", "request_time": "..."}``). ``--json`` prints one JSON
object last instead of the table.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli._common import BadInput, config_of, err

if TYPE_CHECKING:
    from router_core import RuleMatch, RuleSet

__all__ = ["register"]


def _load(args: argparse.Namespace) -> RuleSet:
    from router_core import load_rules

    return load_rules(args.file, config_of(args))


def _check(args: argparse.Namespace) -> int:
    rules = _load(args)
    print(f"{args.file}: ok, {len(rules.rules)} rules, {len(rules.cases)} test cases ({rules.hash})")
    return 0


def _test(args: argparse.Namespace) -> int:
    from router_core import run_cases

    results = run_cases(_load(args))
    failed = [r for r in results if not r.passed]
    if args.json:
        print(json.dumps({"n": len(results), "passed": len(results) - len(failed), "failed": [
            {"name": r.case.name, "expected": r.case.expect.model_dump(), "rule": r.rule, "target": r.target}
            for r in failed]}))
    else:
        for r in results:
            mark = "ok  " if r.passed else "FAIL"
            print(f"{mark} {r.case.name}: rule {r.rule or '-'}, target {r.target or '-'}"
                  + ("" if r.passed else f" (expected rule {r.case.expect.rule or '-'}"
                     f", target {r.case.expect.target or '-'})"))
        print(f"{len(results) - len(failed)} of {len(results)} cases pass")
    return 1 if failed else 0


def _request_match(rules: RuleSet, raw: Any) -> RuleMatch:
    """Match a chat body (analysed) or a case's features."""
    from router_core import case_view, explain_case
    from schemas.policy_file import CaseRequest

    if isinstance(raw, dict) and "messages" in raw:
        from router_core import analyse_request, classify_intent

        a = analyse_request(raw)
        intent = classify_intent(a.query_text)
        req = CaseRequest(input_length=a.features.est_input_tokens, language=a.features.language.value,
                          intent=intent.cls, intent_confidence=intent.confidence,
                          file_types=list(getattr(a.features, "file_types", []) or []),
                          has_attachments=a.features.has_attachments, prompt=a.query_text,
                          request_time=datetime.now(UTC), metadata=raw.get("metadata") or {})
        return rules.match(case_view(req, rules.timezone), explain="all")
    return explain_case(rules, CaseRequest.model_validate(raw))


def _explain(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from router_core import InvalidRequest

    rules = _load(args)
    text = Path(args.request[1:]).read_text(encoding="utf-8") if args.request.startswith("@") else args.request
    try:
        match = _request_match(rules, json.loads(text))
    except (json.JSONDecodeError, ValidationError, InvalidRequest) as exc:
        raise BadInput(f"--request is not a chat request or a case's features: {exc}") from exc
    rule = match.rule
    out = {
        "rule": None if rule is None else rule.name,
        "target": None if rule is None else rule.primary,
        "chain": [] if rule is None else list(rules.chain_of(rule)),
        "origin": None if rule is None else str(rule.origin),
        "tried": [{"rule": t.rule, "matched": t.matched, "detail": t.detail} for t in match.tried],
    }
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    for t in match.tried:
        print(f"{'MATCH' if t.matched else 'no   '} {t.rule}")
        for line in t.detail:
            print(f"        {line}")
    if rule is None:
        print("no rule matched: the router scores every model as usual")
    else:
        chain = " -> ".join(rules.chain_of(rule))
        print(f"rule {rule.name} ({rule.origin}): target {rule.primary or 'every model'}"
              + (f", chain {chain}" if chain else ""))
    return 0


def _run(fn: Any) -> Any:
    def wrapped(args: argparse.Namespace) -> int:
        from router_core import PolicyError
        from schemas.errors import ConfigError

        try:
            return int(fn(args))
        except PolicyError as exc:
            print(str(exc))  # FILE:LINE:COL: message, one a line
            return 2
        except ConfigError as exc:
            err.print(f"[red]error:[/red] {exc}", markup=True)
            return 2
        except BadInput as exc:
            err.print(f"[red]error:[/red] {exc}")
            return 2
    return wrapped


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``policy check|test|explain``."""
    p = sub.add_parser("policy", help="check, test or explain a routing policy file", parents=[common])
    cmds = p.add_subparsers(dest="policy_command", required=True)
    for name, fn, help_ in (("check", _check, "compile FILE against the config's fleet"),
                            ("test", _test, "run FILE's own test cases"),
                            ("explain", _explain, "show which rules a request matches and why")):
        c = cmds.add_parser(name, help=help_, parents=[common])
        c.add_argument("file", help="the policy file (YAML, or a bare .dsl)")
        if name == "explain":
            c.add_argument("--request", required=True, help="JSON (or @file): a chat body or a case's features")
        if name != "check":
            c.add_argument("--json", action="store_true", help="print one JSON object")
        c.set_defaults(func=_run(fn))
