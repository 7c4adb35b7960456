"""The syntax probe: every way an answer can be broken fails with a reason naming it."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import aiohttp
import pytest

from probes.baselines import BaselineStore
from probes.http import ChatCall
from probes.runner import ProbeRunner
from probes.syntax import garbled_reason, judge_syntax
from probes.types import Target
from schemas.common import ProbeKind, ProbeVerdict
from sim.render import mojibake, pick_garble
from tests.probes.conftest import MODEL, completion, fast_settings, fixed_app, serving, sim_app


def _ok(doc: Any) -> ChatCall:
    return ChatCall(200, json.dumps(doc).encode() if not isinstance(doc, bytes) else doc, 3.0)


CASES = [
    ("valid", _ok(completion()), None, ""),
    ("not json", _ok(b"<html>oops</html>"), "not_json", "body is not JSON (17 bytes)"),
    ("cut json", _ok(json.dumps(completion()).encode()[:60]), "not_json", "body is not JSON"),
    ("invalid utf-8", _ok(b'{"id": "\xff\xfe"}'), "encoding", "body is not valid UTF-8: invalid start byte at byte 8"),
    ("no role", _ok({**completion(), "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                                  "message": {"content": "hi"}}]}),
     "schema", "choices[0].message: 'role' is a required property"),
    ("no choices key", _ok({k: v for k, v in completion().items() if k != "choices"}), "schema",
     "body: 'choices' is a required property"),
    ("bad finish", _ok({**completion(), "choices": [{**completion()["choices"][0], "finish_reason": "done"}]}),
     "schema", "choices[0].finish_reason: 'done' is not one of"),
    ("empty", _ok(completion("")), "empty", "content is empty"),
    ("blank", _ok(completion("  \n")), "empty", "content is empty"),
    ("null content", _ok(completion(None)), "empty", "content is empty"),
    ("replacement", _ok(completion("Hel\ufffdo wo\ufffd\ufffdd")), "garbled",
     "content is garbled: 3 replacement characters (U+FFFD)"),
    ("control", _ok(completion("Hello\x00 world\x07")), "garbled",
     "content is garbled: 2 control characters (first U+0000)"),
    ("mojibake", _ok(completion("Caf\u00c3\u00a9 au lait, s\u00e2\u20ac\u2122il vous pla\u00c3\u00aet")), "garbled",
     "content is garbled: mojibake"),
    ("http 500", ChatCall(500, b'{"error": {"message": "engine failed"}}', 1.0), "http_status",
     "HTTP 500: engine failed"),
    ("timeout", ChatCall(None, None, 2000.0, "timeout", "no answer within 2 s"), "timeout", "no answer within 2 s"),
]


@pytest.mark.parametrize(("name", "call", "error_class", "reason"), CASES, ids=[c[0] for c in CASES])
def test_judge(name: str, call: ChatCall, error_class: str | None, reason: str) -> None:
    j = judge_syntax(call)
    assert j.error_class == error_class
    assert j.reason.startswith(reason)
    assert j.verdict is (ProbeVerdict.OK if error_class is None else ProbeVerdict.FAILED)
    assert j.value == (1.0 if error_class is None else 0.0)


SIM_TEXTS = ["Hello! How can I help?", "你好！很高兴和你聊天。", "Ticket received. Priority: high."]


@pytest.mark.parametrize("text", SIM_TEXTS)
def test_every_mojibake_the_sim_makes_is_caught(text: str) -> None:
    assert garbled_reason(text) is None
    assert garbled_reason(mojibake(text)) is not None


def test_clean_text_with_newlines_and_tabs_passes() -> None:
    assert garbled_reason("line one\n\tline two\r\n") is None


def _run(app, kinds=(ProbeKind.SYNTAX,), *, fault: dict[str, Any] | None = None, repeat: int = 1, model: str = MODEL,
         timeout_s: float = 2.0):
    async def main():
        async with serving(app) as url, aiohttp.ClientSession() as session:
            if fault is not None:
                async with session.post(f"{url}/admin/faults", json=fault) as resp:
                    assert resp.status == 201
            runner = ProbeRunner(fast_settings(timeout_s=timeout_s), session, embedder=None, baselines=BaselineStore())
            target = Target("sim-a", model, url)
            out = [await runner.run(kind, target) for _ in range(repeat) for kind in kinds]
            if fault is not None:
                async with session.delete(f"{url}/admin/faults") as resp:  # ends a hang, too
                    assert resp.status == 200
            return out

    return asyncio.run(main())


def test_healthy_sim_instance_passes() -> None:
    (result,) = _run(sim_app())
    assert result.verdict is ProbeVerdict.OK and result.value == 1.0 and result.reason == ""
    assert result.instance == "sim-a" and result.model == MODEL and result.kind is ProbeKind.SYNTAX


def test_the_garbage_fault_fails_with_a_reason_naming_what_was_wrong() -> None:
    results = _run(sim_app(seed=2), fault={"kind": "garbage"}, repeat=8)
    assert all(r.verdict is ProbeVerdict.FAILED for r in results)
    kinds = {r.error_class for r in results}
    assert kinds == {"not_json", "garbled"}  # both of the sim's garbles: a cut body and mojibake
    for r in results:
        assert r.reason.startswith("body is not JSON") or r.reason.startswith("content is garbled: ")


def test_the_sim_garbles_are_the_two_known_kinds() -> None:
    assert {pick_garble(random.Random(i)) for i in range(20)} == {"cut", "mojibake"}


def test_unknown_model_fails_with_the_upstreams_message() -> None:
    body = {"error": {"message": "The model `nope` does not exist or you do not have access to it.",
                      "type": "invalid_request_error", "param": None, "code": "model_not_found"}}
    (result,) = _run(fixed_app(body, status=404), model="nope")
    assert result.verdict is ProbeVerdict.FAILED and result.error_class == "http_status"
    assert result.reason == "HTTP 404: The model `nope` does not exist or you do not have access to it."


def test_a_hung_instance_times_out_as_failed() -> None:
    (result,) = _run(sim_app(), fault={"kind": "hang"}, timeout_s=0.3)
    assert result.verdict is ProbeVerdict.FAILED and result.error_class == "timeout"
    assert "within 0.3 s" in result.reason
