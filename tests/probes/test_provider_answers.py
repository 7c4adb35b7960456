"""What a hosted OpenAI-compatible provider answers and expects: no ``message.refusal``, its own model name."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from probes.baselines import BaselineStore
from probes.contracts import RESPONSE_SCHEMA_PATH, probe_schema, response_schema
from probes.http import ChatCall
from probes.runner import ProbeRunner
from probes.syntax import judge_syntax
from probes.types import Target
from schemas.common import ProbeKind, ProbeVerdict
from tests.probes.conftest import completion, fast_settings, serving


def without_refusal(doc: dict[str, Any]) -> dict[str, Any]:
    choice = doc["choices"][0]
    message = {k: v for k, v in choice["message"].items() if k != "refusal"}
    return {**doc, "choices": [{**choice, "message": message}]}


def answer(doc: dict[str, Any]) -> ChatCall:
    return ChatCall(200, json.dumps(doc).encode(), 4.0)


def test_an_answer_without_refusal_passes_the_syntax_probe() -> None:
    j = judge_syntax(answer(without_refusal(completion())))
    assert j.verdict is ProbeVerdict.OK and j.error_class is None


@pytest.mark.parametrize(("doc", "reason"), [
    ({k: v for k, v in without_refusal(completion()).items() if k != "choices"}, "body: 'choices' is a required"),
    (without_refusal(completion(role=None)), "choices[0].message.role: None is not of type"),
    (completion(refusal=7), "choices[0].message.refusal: 7 is not valid"),
    ({k: v for k, v in without_refusal(completion()).items() if k != "created"}, "body: 'created' is a required"),
])
def test_the_rest_of_the_contract_is_still_checked(doc: dict[str, Any], reason: str) -> None:
    j = judge_syntax(answer(doc))
    assert j.verdict is ProbeVerdict.FAILED and j.error_class == "schema"
    assert j.reason.startswith(reason), j.reason


def test_only_message_refusal_is_relaxed_and_the_vendored_copy_is_untouched() -> None:
    strict, lenient = response_schema(), probe_schema()
    message = ["properties", "choices", "items", "properties", "message", "required"]

    def at(doc: dict[str, Any], path: list[str]) -> Any:
        for part in path:
            doc = doc[part]
        return doc

    assert "refusal" in at(strict, message) and "refusal" not in at(lenient, message)
    assert set(at(strict, message)) - set(at(lenient, message)) == {"refusal"}
    assert json.loads(RESPONSE_SCHEMA_PATH.read_text()) == strict  # the runtime copy is not rewritten
    lenient_copy = json.loads(json.dumps(lenient))
    at(lenient_copy, message[:-1])["required"] = at(strict, message)
    assert lenient_copy == strict  # nothing else differs


def test_probes_send_the_upstream_model_name_and_record_the_fleets() -> None:
    """A provider knows the model by its own name: the probe asks for that, the result keeps the fleet's name."""
    seen: list[str] = []
    provider_doc = without_refusal(completion())

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body["model"])
        if body["model"] != "deepseek-ai/DeepSeek-V4":
            return web.json_response({"error": {"message": f"model {body['model']} does not exist"}}, status=404)
        return web.json_response(provider_doc)

    async def main() -> list[tuple[str, ProbeVerdict, str]]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        out = []
        async with serving(app) as url, aiohttp.ClientSession() as session:
            runner = ProbeRunner(fast_settings(), session, embedder=None, baselines=BaselineStore())
            for upstream in ("deepseek-ai/DeepSeek-V4", None):
                target = Target("hosted", "deepseek-v4-32k", url, None, upstream)
                r = await runner.run(ProbeKind.SYNTAX, target)
                out.append((r.model, r.verdict, r.reason))
        return out

    (named, plain) = asyncio.run(main())
    assert seen == ["deepseek-ai/DeepSeek-V4", "deepseek-v4-32k"]
    assert named == ("deepseek-v4-32k", ProbeVerdict.OK, "")
    assert plain[1] is ProbeVerdict.FAILED and "model deepseek-v4-32k does not exist" in plain[2]
