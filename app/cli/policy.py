"""``routelens policy check|test|explain FILE``: a routing policy validated, tested, explained.

``check`` compiles FILE against ``--config``'s fleet: exit 0 and a one-line summary, or exit 2 and
one ``FILE:LINE:COL: message`` line per problem (on stdout, as linters print). ``test`` runs the
file's own ``tests:`` cases (exit 0 all pass, 1 some fail, 2 it does not load). ``explain FILE
--request JSON`` shows which rules were tried and why the first match matched; JSON is either a
chat-completions body or a case's features (``{"input_length": 9000, "prompt": "...",
"request_time": "..."}``). ``--header 'NAME: VALUE'`` (repeatable, as ``curl -H``) sends a header
with either, as the gateway would read it from the HTTP request (``header('x-...')`` conditions).
``--json`` prints one JSON object last instead of the table.

A chat body is understood by the gateway's own code (:class:`router_core.PolicyGate` built from
``--config``, FILE's rules in place of the live ones), so ``query_length`` is the last user
message's, ``intent`` is ``routing.intents``' verdict when it gives one, and ``keyword_score`` is
``routing.keywords``' score (on no live state: never load-adjusted). Like a started gateway, it
fits the semantic intents first when their embedding path is on (cached beside the routes file).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli._common import BadInput, config_of, err, fail

if TYPE_CHECKING:
    from router_core import PolicyGate, RuleMatch, RuleSet
    from schemas.config import RouteLensConfig
    from schemas.fleet import InstanceSnapshot

__all__ = ["register"]


def _load(args: argparse.Namespace, config: RouteLensConfig | None = None, *, strict_cases: bool = False) -> RuleSet:
    """FILE compiled; ``strict_cases``: a case expecting a rule FILE does not have is refused (it could only fail)."""
    from router_core import load_rules

    return load_rules(args.file, config or config_of(args), strict_cases=strict_cases)


def _check(args: argparse.Namespace) -> int:
    rules = _load(args, strict_cases=True)
    print(f"{args.file}: ok, {len(rules.rules)} rules, {len(rules.cases)} test cases ({rules.hash})")
    return 0


def _test(args: argparse.Namespace) -> int:
    from router_core import run_cases

    results = run_cases(_load(args, strict_cases=True))
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


def _gate(config: RouteLensConfig) -> PolicyGate:
    """The gateway's policy gate for ``config`` (its intents and keyword scoring), without its own policy file.

    The live file is left out: FILE's rules are matched instead, and a broken live file must not
    stop FILE being explained. The embedding path is fitted before the first query, as a started
    gateway's is (until it is, every query takes the slow path and would fit it anyway).
    """
    from app.run.access import hash_key_of
    from router_core import PolicyGate

    gate = PolicyGate.load(config.model_copy(update={"routing": config.routing.model_copy(update={"policy": None})}),
                           hash_key=hash_key_of(config))  # withheld values' fingerprints as the gateway's
    clf = gate.intents
    if clf is not None and clf.has_embedding and clf.settings.escalate and not clf.is_fitted:
        err.print(f"fitting the semantic intents of {clf.settings.routes} (routing.intents; cached beside it)...",
                  markup=False, soft_wrap=True)
        clf.fit_embedding()
    return gate


def _no_state() -> Mapping[str, InstanceSnapshot]:
    return {}  # no gateway, no scraped state: the keyword score is never load-adjusted


def _chat_match(rules: RuleSet, config: RouteLensConfig, body: dict[str, Any],
                headers: Mapping[str, str]) -> tuple[RuleMatch, dict[str, Any]]:
    """Match a chat body sent with ``headers`` as the gateway does (:meth:`PolicyGate.understand`).

    Returns the match and the view's intent and keyword score.
    """
    from router_core import AUTO_MODEL, RuleMatch, analyse_request

    analysis = analyse_request(body, max_chars=config.router.analyse_max_chars,
                               attachments=config.routing.attachments)
    if analysis.features.requested_model != AUTO_MODEL:  # the gateway routes it to that model, rules untried
        return RuleMatch(None, ()), {"model": analysis.features.requested_model}
    u = asyncio.run(_gate(config).understand(analysis, body, headers, datetime.now(UTC), _no_state, rules=rules,
                                             explain="all"))
    assert u.choice is not None  # rules given: always a choice
    return u.choice.match, {"intent": u.intent, "intent_confidence": u.confidence,
                            "keyword_score": u.extra.get("keyword_score")}


def _request_match(rules: RuleSet, config: RouteLensConfig, raw: Any,
                   headers: Mapping[str, str]) -> tuple[RuleMatch, dict[str, Any]]:
    """Match a chat body (as the gateway would) or a case's features, sent with ``headers`` (``--header``)."""
    from app.run.access import hash_key_of
    from router_core import explain_case
    from schemas.policy_file import CaseRequest

    if isinstance(raw, dict) and "messages" in raw:
        if "headers" in raw:  # the gateway reads headers from HTTP, never from the body: it would be ignored
            raise BadInput("--request: a chat body's headers are HTTP headers: give each with --header 'NAME: VALUE'")
        return _chat_match(rules, config, raw, headers)
    if headers and isinstance(raw, dict):
        own = raw.get("headers")
        if isinstance(own, dict) and (both := sorted({str(k).lower() for k in own} & set(headers))):
            raise BadInput(f"--header {both[0]}: the request's features give it too (their headers)")
        raw = {**raw, "headers": {**(own if isinstance(own, dict) else {}), **headers}}
    key = hash_key_of(config)  # a withheld value's fingerprint as the gateway's traces hold it
    return explain_case(rules, CaseRequest.model_validate(raw), None if key is None else key.encode("utf-8")), {}


def _request_text(value: str) -> str:
    """``--request``'s JSON: the value, or the file it names after ``@``."""
    if not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise BadInput(f"--request: cannot read {value[1:]}: {why}") from exc


_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP field name (RFC 9110 token)


def _headers(given: Sequence[str]) -> dict[str, str]:
    """``--header``'s ``NAME: VALUE`` pairs, names lower-cased (case-insensitive, as the gateway reads them)."""
    out: dict[str, str] = {}
    for item in given:
        name, colon, value = item.partition(":")
        name = name.strip()
        if not colon or not _TOKEN.match(name):
            raise BadInput(f"--header {item!r}: write NAME: VALUE, as in --header 'x-tenant: acme'")
        if any(ch in value for ch in "\r\n\0"):
            raise BadInput(f"--header {name}: a header value is one line")
        if name.lower() in out:
            raise BadInput(f"--header {name}: given twice")
        out[name.lower()] = value.strip(" \t")
    return out


def _explain(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from router_core import InvalidRequest

    config = config_of(args)
    rules = _load(args, config)
    headers = _headers(args.header)
    text = _request_text(args.request)
    try:
        match, seen = _request_match(rules, config, json.loads(text), headers)
    except ValidationError as exc:  # pydantic's four lines and a link: the first error, where it is, in one
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the request"
        raise BadInput(f"--request is not a chat request or a case's features: {where}: "
                       f"{first['msg'].removeprefix('Value error, ')}") from exc
    except (json.JSONDecodeError, InvalidRequest) as exc:
        raise BadInput(f"--request is not a chat request or a case's features: {exc}") from exc
    rule = match.rule
    out = {
        "rule": None if rule is None else rule.name,
        "target": None if rule is None else rule.primary,
        "chain": [] if rule is None else list(rules.chain_of(rule)),
        "origin": None if rule is None else str(rule.origin),
        "tried": [{"rule": t.rule, "matched": t.matched, "detail": t.detail} for t in match.tried],
        **seen,
    }
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    if "model" in seen:
        print(f"the request names model {seen['model']}: the gateway sends it there and tries no rule")
        return 0
    if "intent" in seen:
        conf = seen["intent_confidence"]
        print(f"intent {seen['intent']}" + ("" if conf is None else f" ({conf:.3f})")
              + ("" if seen["keyword_score"] is None else f", keyword_score {seen['keyword_score']:g}"))
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

        try:  # another ConfigError (the configuration) is main's: one clear line, exit 2
            return int(fn(args))
        except PolicyError as exc:
            print(str(exc))  # FILE:LINE:COL: message, one a line
            return 2
        except BadInput as exc:  # one line, however narrow the terminal or pipe
            fail(str(exc))
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
            c.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                           help="a request header, as curl -H takes it (repeatable), for header('...') conditions")
        if name != "check":
            c.add_argument("--json", action="store_true", help="print one JSON object")
        c.set_defaults(func=_run(fn))
