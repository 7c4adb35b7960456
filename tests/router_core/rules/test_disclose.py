"""What a rule's stored explanation shows of a header or metadata value: only what the policy names.

Every rule tried is explained in the trace (``policy.tried[].detail``), and the trace is stored:
a header or metadata value the condition does not name is told by its size and fingerprint, a
credential-like header or key not at all.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from router_core.rules.condition import compile_condition
from router_core.rules.dsl import compile_dsl
from router_core.rules.ir import RuleSet
from router_core.rules.load import compile_policy
from router_core.rules.request import RequestView
from schemas.config import RouteLensConfig
from tests.router_core.rules.test_why_not import view

TENANT = "CANARY-hdr-tenant-be18f0c0"
PROJECT = "CANARY-meta-project-e1f18e35"
TOKEN = "tok-CANARY-3f9a1c2e7b"
AUDITED = "header('x-tenant') == \"gold-tenant\" && metadata.project == \"alpha-project\""
CONFIG = RouteLensConfig.model_validate({"fleet": {"instances": [
    {"id": "a-1", "model": "a", "url": "http://127.0.0.1:9"}]}})


def fingerprint(value: str) -> str:
    """What ``printf %s VALUE | sha256sum | cut -c1-8`` prints."""
    return hashlib.sha256(value.encode()).hexdigest()[:8]


def leaks(text: str, value: str, policy: str = "") -> bool:
    """Whether ``text`` holds a 5-character piece of ``value`` that the ``policy`` text does not (its labels)."""
    pieces = {value[i:i + 5] for i in range(len(value) - 4)}
    return any(p in text and p not in policy for p in pieces)


def request(**kw: Any) -> RequestView:
    return view(**{"headers": {"x-tenant": TENANT, "x-auth-token": TOKEN}, "metadata": {"project": PROJECT}, **kw})


def rule_sets(condition: str) -> dict[str, RuleSet]:
    """The condition as a YAML matrix rule and as a DSL clause, each before a catch-all."""
    matrix = {"routing_matrix": [{"rule_name": "r", "condition": condition, "primary_target": "a"},
                                 {"rule_name": "else", "primary_target": "a"}]}
    dsl = f'IF {condition} THEN route_to("a") ELSE route_to("a")'
    return {"matrix": compile_policy(json.dumps(matrix), "p.yaml", CONFIG),
            "dsl": RuleSet(compile_dsl(dsl, source="p.dsl"), "p.dsl")}


def details(condition: str, req: RequestView) -> list[str]:
    """Every detail line the rule gets, in the request path's form and the dry run's (every atom)."""
    out: list[str] = []
    for rules in rule_sets(condition).values():
        for explain in ("matched", "all"):
            out += rules.match(req, explain=explain).tried[0].detail  # type: ignore[arg-type]
    return out


def test_the_audited_rule_stores_fingerprints_not_the_values() -> None:
    lines = details(AUDITED, request())
    assert f"header('x-tenant') = <withheld: 26 chars, sha256:{fingerprint(TENANT)}> != \"gold-tenant\"" in lines
    assert f"metadata.project = <withheld: 28 chars, sha256:{fingerprint(PROJECT)}> != \"alpha-project\"" in lines
    text = "\n".join(lines)
    assert not leaks(text, TENANT, AUDITED) and not leaks(text, PROJECT, AUDITED) and "CANARY" not in text


def test_the_same_value_gives_the_same_fingerprint_and_another_value_another() -> None:
    cond = compile_condition("header('x-tenant') == 'gold-tenant'")
    first, again = cond.why_not(request()), cond.why_not(request(metadata={"other": 1}))
    other = cond.why_not(request(headers={"x-tenant": TENANT.upper()}))
    assert first == again and first != other
    assert fingerprint(TENANT) in first[0] and fingerprint(TENANT.upper()) in other[0]


def test_a_value_the_condition_names_is_shown() -> None:
    cond = compile_condition("header('x-tenant') == 'gold-tenant' && metadata.project == 'alpha-project'")
    gold = request(headers={"x-tenant": "gold-tenant"})
    assert cond.why_not(gold) == [f"metadata.project = <withheld: 28 chars, sha256:{fingerprint(PROJECT)}> "
                                  '!= "alpha-project"']
    assert cond.explain(gold)[0] == "header('x-tenant') == 'gold-tenant': true (header('x-tenant')=\"gold-tenant\")"
    # named by another atom of the same condition, for the same feature: the policy names it too
    either = compile_condition("header('x-tenant') == 'gold-tenant' || header('x-tenant') == 'silver' "
                               "&& input_length > 8000")
    assert either.why_not(request(headers={"x-tenant": "silver"}), every=True) == [
        'header(\'x-tenant\') = "silver" != "gold-tenant"', "input_length = 500 <= 8000"]
    # named for another feature only: still the caller's value here
    crossed = compile_condition("header('x-tenant') == 'gold-tenant' || metadata.project == 'silver'")
    assert "silver" not in crossed.why_not(request(headers={"x-tenant": "silver"}), every=True)[0]


def test_list_membership_shows_the_list_and_withholds_the_value() -> None:
    condition = "metadata.project in ['alpha-project', 'beta'] && header('x-tenant') not in ['blocked']"
    lines = details(condition, request())
    assert f"metadata.project = <withheld: 28 chars, sha256:{fingerprint(PROJECT)}> not in [\"alpha-project\", " \
           '"beta"]' in lines
    assert not leaks("\n".join(lines), PROJECT, condition) and "CANARY" not in "\n".join(lines)
    listed = compile_condition("header('x-tenant') not in ['blocked', 'banned']")
    assert listed.why_not(request(headers={"x-tenant": "banned"})) == [
        'header(\'x-tenant\') = "banned" in ["blocked", "banned"]']  # a listed value: the policy names it


def test_contains_atoms_say_whether_they_matched_and_echo_nothing() -> None:
    lines = details("prompt_contains('contract') && header('x-tenant') in ['gold-tenant']", request())
    assert lines[0] == f"header('x-tenant') = <withheld: 26 chars, sha256:{fingerprint(TENANT)}> not in " \
                       '["gold-tenant"]'
    condition = "!prompt_contains('password') || metadata.project == 'alpha-project'"
    lines = details(condition, request())
    assert "prompt_contains('password') matched" in lines
    text = "\n".join(lines)
    assert "hunter2" not in text and not leaks(text, PROJECT, condition) and "CANARY" not in text


SECRET_NAMES = ["x-auth-token", "X-Session-Id", "x-client-secret", "x-api-key", "authorization", "proxy-authorization",
                "cookie", "x-csrf-token", "x-db-password"]


def test_a_header_named_like_a_credential_is_redacted() -> None:
    for name in SECRET_NAMES:
        req, label = request(headers={name.lower(): TOKEN}), f"header('{name.lower()}')"
        for condition in (f"header('{name}') == 'x'", f"header('{name}') == null", f"header('{name}') in ['x', 'y']",
                          f"header('{name}') != '{TOKEN}'"):  # even a value the policy names
            lines = details(condition, req)
            assert lines and all(line.startswith(f"{label} = <redacted>") for line in lines), lines
            assert fingerprint(TOKEN) not in "\n".join(lines)
        (line,) = compile_condition(f"header('{name}') != null").explain(req)
        assert line.endswith(f"({label}=<redacted>)")


def test_other_headers_are_withheld_not_redacted() -> None:
    for name in ["x-tenant", "x-tier", "user-agent", "x-request-id", "accept-language"]:
        (line,) = compile_condition(f"header('{name}') == 'x'").why_not(request(headers={name: TOKEN}))
        assert line == f"header('{name}') = <withheld: {len(TOKEN)} chars, sha256:{fingerprint(TOKEN)}> != \"x\""


def test_a_metadata_key_named_like_a_credential_is_redacted() -> None:
    cond = compile_condition("metadata.auth.api_key == 'x'")
    lines = cond.why_not(request(metadata={"auth": {"api_key": TOKEN}}))
    assert lines == ['metadata.auth.api_key = <redacted> != "x"']


LIST_JSON, OBJECT_JSON = '["a","b"]', '{"a":2,"b":1}'  # compact JSON, keys sorted


def test_metadata_values_of_every_type() -> None:
    cond = compile_condition("metadata.quota > 100")
    for value, shown in [
        (7, f"<withheld: a number, sha256:{fingerprint('7')}> <= 100"),
        (["a", "b"], f"<withheld: a list of 2, sha256:{fingerprint(LIST_JSON)}> (not > 100)"),
        ({"b": 1, "a": 2}, f"<withheld: an object of 2 keys, sha256:{fingerprint(OBJECT_JSON)}> (not > 100)"),
        ("a", f"<withheld: 1 char, sha256:{fingerprint('a')}> (not > 100)"),
        ("ééé", f"<withheld: 3 chars, sha256:{fingerprint('ééé')}> (not > 100)"),  # characters; the UTF-8 hashed
        (None, "null (not > 100)"),  # null and true/false tell no more than the verdict: shown
        (True, "true (not > 100)"),
        (100, "100 <= 100"),  # the literal itself
    ]:
        assert cond.why_not(request(metadata={"quota": value})) == [f"metadata.quota = {shown}"], value


def test_two_features_compared_show_two_fingerprints_equal_when_the_values_are() -> None:
    cond = compile_condition("header('x-tenant') != metadata.project")
    same = request(metadata={"project": TENANT})
    (line,) = cond.why_not(same)
    assert line.count(f"sha256:{fingerprint(TENANT)}") == 2 and "CANARY" not in line


def test_a_long_value_keeps_the_line_short() -> None:
    value = "CANARY" + "x" * 10_000
    (line,) = compile_condition("header('x-tenant') == 'gold-tenant'").why_not(request(headers={"x-tenant": value}))
    assert line == f"header('x-tenant') = <withheld: 10006 chars, sha256:{fingerprint(value)}> != \"gold-tenant\""
    assert "CANARY" not in line and len(line) < 100


def test_only_header_and_metadata_values_are_withheld() -> None:
    cond = compile_condition("language == 'zh' || intent in ['legal'] || file_type == 'pdf' || input_length > 8000 "
                             "|| header('x-tenant') == 'gold'")
    assert cond.why_not(request(), every=True) == [
        'language = "en" != "zh"', 'intent = "chat" not in ["legal"]', 'file_type = "docx" != "pdf"',
        "input_length = 500 <= 8000", f"header('x-tenant') = <withheld: 26 chars, sha256:{fingerprint(TENANT)}> "
                                      '!= "gold"']


def test_with_the_hash_key_the_fingerprint_is_an_hmac_under_it() -> None:
    """A short guessable value cannot be confirmed by hashing guesses without the query hash's key."""
    key = b"routelens-test-key"
    keyed = hmac.new(key, TENANT.encode(), hashlib.sha256).hexdigest()[:8]
    withheld = f"header('x-tenant') = <withheld: 26 chars, hmac-sha256:{keyed}> != \"gold-tenant\""
    lines = details(AUDITED, request(fingerprint_key=key))
    assert lines and all(line.startswith(withheld) or line.startswith("metadata.project") or line.startswith("(")
                         for line in lines)
    assert withheld in lines and f"sha256:{fingerprint(TENANT)}" not in " ".join(lines)
    other = details(AUDITED, request(fingerprint_key=b"another-key"))
    assert withheld not in other and "hmac-sha256:" in other[0]
    cond = compile_condition("header('x-tenant') != metadata.project")  # the fact path (why_not) keys it too
    (line,) = cond.why_not(request(metadata={"project": TENANT}, fingerprint_key=key))
    assert line.count(f"hmac-sha256:{keyed}") == 2
    (line,) = compile_condition("metadata.project != null").explain(request(fingerprint_key=key))
    keyed = hmac.new(key, PROJECT.encode(), hashlib.sha256).hexdigest()[:8]
    assert line == f"metadata.project != null: true (metadata.project=<withheld: 28 chars, hmac-sha256:{keyed}>)"
