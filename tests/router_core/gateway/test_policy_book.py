"""The effective policy's hash: one per (sections, rule set), stored once, and a reload makes a new one."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from router_core.config_file import read_config
from router_core.decide.builtin import build_router
from router_core.decide.policy_doc import canonical, document_hash, from_document, policy_document
from router_core.gateway.policy_book import PolicyBook
from router_core.gateway.policy_gate import PolicyGate
from schemas.policy_record import PolicyRecord

CONFIG = """
fleet:
  instances:
    - {id: big-a, model: big, url: "http://127.0.0.1:1"}
    - {id: small-a, model: small, url: "http://127.0.0.1:2"}
routing: {policy: rules.yaml}
"""
RULES = """
routing_matrix:
  - rule_name: long
    condition: "input_length > 1000"
    primary_target: big
"""


def setup(tmp_path: Path) -> tuple[PolicyGate, PolicyBook, list[PolicyRecord]]:
    (tmp_path / "routelens.yaml").write_text(CONFIG)
    (tmp_path / "rules.yaml").write_text(RULES)
    config = read_config(tmp_path / "routelens.yaml")
    gate = PolicyGate.load(config)
    records: list[PolicyRecord] = []
    book = PolicyBook(gate, wall=lambda: datetime(2026, 12, 4, tzinfo=UTC), router_version="v1",
                      record=records.append)
    return gate, book, records


def test_a_policy_is_recorded_once_under_the_hash_of_its_document(tmp_path: Path) -> None:
    gate, book, records = setup(tmp_path)
    policy = build_router(gate.config).policy
    first = book.hash_of(policy)
    assert [book.hash_of(policy) for _ in range(3)] == [first] * 3 and len(records) == 1
    (rec,) = records
    assert rec.policy_hash == first == document_hash(json.loads(rec.document))
    config, rules = from_document(rec.document)  # what a replay gets back, the files aside
    assert rules is not None and [r.name for r in rules.rules] == ["long"] and rules.text == RULES
    assert document_hash(policy_document(config, rules)) == first  # the same policy, rebuilt from its record


def test_a_reloaded_rule_set_is_a_new_policy(tmp_path: Path) -> None:
    gate, book, records = setup(tmp_path)
    policy = build_router(gate.config).policy
    before = book.hash_of(policy)
    (tmp_path / "rules.yaml").write_text(RULES.replace("1000", "2000"))
    assert gate.reload()
    after = book.hash_of(policy)
    assert after != before and len(records) == 2 and records[1].policy_hash == after
    assert '"input_length > 2000"' in records[1].document or "2000" in records[1].document


def test_the_hash_does_not_depend_on_where_the_files_are(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    hashes = []
    for where in (a, b):
        gate, _, _ = setup(where)
        doc = policy_document(gate.config, gate.rules)
        assert str(where) not in canonical(doc)
        hashes.append(document_hash(doc))
    assert hashes[0] == hashes[1]
