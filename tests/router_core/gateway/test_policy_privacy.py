"""A routing rule over headers and ``metadata``: the trace the gateway stores never holds their values.

The privacy audit's case: ``header('x-tenant') == "gold-tenant" && metadata.project ==
"alpha-project"`` stored the caller's tenant and project, cut at 60 characters, in
``policy.tried[].detail`` of every request it did not match. A value the policy does not name is
stored as its size and fingerprint; a credential-like header not at all.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from typing import Any

from ingest.codec.encoder import dumps
from schemas import DecisionTrace
from tests.router_core.gateway.gateway_kit import gateway_client, trace_of
from tests.router_core.gateway.test_dry_run import dry_run
from tests.router_core.gateway.test_forwarding import reply
from tests.router_core.gateway.test_policy_routes import TWO_MODELS, chat, policy

TENANT, PROJECT, TOKEN = "CANARY-hdr-tenant-be18f0c0", "CANARY-meta-project-e1f18e35", "CANARY-tok-5d1e7a90"
GOLD = ('  - {rule_name: gold, condition: \'header("x-tenant") == "gold-tenant" && metadata.project == '
        '"alpha-project"\', primary_target: n}\n')
TOKENED = '  - {rule_name: tokened, condition: \'header("x-auth-token") == "t"\', primary_target: n}\n'
PRESENT = '  - {rule_name: present, condition: \'metadata.project != null\', primary_target: m}\n'


def sha8(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:8]


def test_the_stored_trace_keeps_fingerprints_of_header_and_metadata_values() -> None:
    headers = {"x-tenant": TENANT, "x-auth-token": TOKEN}

    async def run() -> list[bytes]:
        async with gateway_client({"a": reply(200), "b": reply(200)}, instances=TWO_MODELS,
                                  policy=policy(GOLD, TOKENED, PRESENT)) as (client, hooks):
            stored = []
            for _ in range(2):
                resp = await client.post("/v1/chat/completions", json=chat("hello", metadata={"project": PROJECT}),
                                         headers=headers)
                assert resp.status == 200
                trace = trace_of(hooks, resp.headers)
                assert trace.policy is not None and trace.rule == "present"
                assert [t.detail for t in trace.policy.tried] == [
                    [f"header('x-tenant') = <withheld: 26 chars, sha256:{sha8(TENANT)}> != \"gold-tenant\"",
                     "(other atoms failed too)"],
                    ["header('x-auth-token') = <redacted> != \"t\""],
                    [f"metadata.project != null: true (metadata.project=<withheld: 28 chars, sha256:{sha8(PROJECT)}>)"],
                ]
                stored.append(dumps(trace))  # what the spools and the store keep
            answer = await dry_run(client, chat("hello", metadata={"project": PROJECT}), headers)
            assert answer["trace"]["policy"]["tried"][0]["detail"] == [  # the dry run lists every failed atom
                f"header('x-tenant') = <withheld: 26 chars, sha256:{sha8(TENANT)}> != \"gold-tenant\"",
                f"metadata.project = <withheld: 28 chars, sha256:{sha8(PROJECT)}> != \"alpha-project\""]
            return [*stored, repr(answer).encode()]

    for text in asyncio.run(run()):
        assert b"CANARY" not in text and b"be18f0c0" not in text and b"e1f18e35" not in text
        assert sha8(TOKEN).encode() not in text


def test_a_value_the_policy_names_is_stored_as_is() -> None:
    async def run() -> None:
        async with gateway_client({"a": reply(200), "b": reply(200)}, instances=TWO_MODELS,
                                  policy=policy(GOLD)) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=chat("hello", metadata={"project": PROJECT}),
                                     headers={"x-tenant": "gold-tenant"})
            trace = trace_of(hooks, resp.headers)
            assert trace.policy is not None and trace.policy.tried[0].detail == [
                f"metadata.project = <withheld: 28 chars, sha256:{sha8(PROJECT)}> != \"alpha-project\""]
            resp = await client.post("/v1/chat/completions", json=chat("hello", metadata={"project": "alpha-project"}),
                                     headers={"x-tenant": "gold-tenant"})
            trace = trace_of(hooks, resp.headers)
            assert trace.rule == "gold" and trace.policy is not None and trace.policy.tried[0].detail == [
                'header("x-tenant") == "gold-tenant": true (header(\'x-tenant\')="gold-tenant")',
                'metadata.project == "alpha-project": true (metadata.project="alpha-project")']

    asyncio.run(run())


def test_with_a_hash_key_the_stored_fingerprints_are_keyed() -> None:
    """As the query hash: a guessed tenant cannot be confirmed against a stored trace without the key."""
    key = "privacy-test-key"

    def hmac8(value: str) -> str:
        return hmac.new(key.encode(), value.encode(), hashlib.sha256).hexdigest()[:8]

    async def run() -> tuple[DecisionTrace, dict[str, Any]]:
        async with gateway_client({"a": reply(200), "b": reply(200)}, instances=TWO_MODELS,
                                  policy=policy(GOLD, PRESENT), hash_key=key) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=chat("hello", metadata={"project": PROJECT}),
                                     headers={"x-tenant": TENANT})
            return trace_of(hooks, resp.headers), await dry_run(client, chat("hello", metadata={"project": PROJECT}),
                                                                {"x-tenant": TENANT})

    trace, answer = asyncio.run(run())
    assert trace.query_hash.startswith("hmac-sha256:") and trace.policy is not None
    assert trace.policy.tried[0].detail == [
        f"header('x-tenant') = <withheld: 26 chars, hmac-sha256:{hmac8(TENANT)}> != \"gold-tenant\"",
        "(other atoms failed too)"]
    assert answer["trace"]["policy"]["tried"][0]["detail"][1] == (
        f"metadata.project = <withheld: 28 chars, hmac-sha256:{hmac8(PROJECT)}> != \"alpha-project\"")
    text = dumps(trace)
    assert sha8(TENANT).encode() not in text and sha8(PROJECT).encode() not in text
