"""ChatCompletionRequest takes JSON types as OpenAI's API does: no string, bool or decimal stands in for another type.

The gateway validates the parsed body (``validate_python``): pydantic's lax mode would coerce ``"false"`` to a
boolean, ``true`` to 1 and ``"1.5"`` to a number, and the stages after the check read the raw values.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from schemas.openai_chat import ChatCompletionRequest

BASE: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
VALIDATE = ChatCompletionRequest.__pydantic_validator__.validate_python

REFUSED = [
    ({"stream": "false"}, ("stream",)), ({"stream": 0}, ("stream",)),
    ({"stream": True, "stream_options": {"include_usage": "false"}}, ("stream_options", "include_usage")),
    ({"stream_options": {"include_usage": True}}, ("stream_options",)),
    ({"stream": None, "stream_options": {}}, ("stream_options",)),
    ({"temperature": "1.5"}, ("temperature",)), ({"top_p": False}, ("top_p",)),
    ({"n": "2"}, ("n",)), ({"n": 2.0}, ("n",)), ({"max_tokens": True}, ("max_tokens",)),
    ({"max_tokens": 0}, ("max_tokens",)), ({"max_completion_tokens": 1.0}, ("max_completion_tokens",)),
]


@pytest.mark.parametrize(("fields", "loc"), REFUSED, ids=[str(f) for f, _ in REFUSED])
def test_a_value_of_another_json_type_is_refused_where_it_is(fields: dict[str, Any], loc: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        VALIDATE(BASE | fields)
    assert caught.value.errors()[0]["loc"] == loc


def test_json_shapes_still_validate_from_python_dicts() -> None:
    req = VALIDATE(BASE | {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x"},
                                                  {"type": "image_url", "image_url": {"url": "https://e/a.png"}}]}],
        "temperature": 1, "top_p": 0, "n": 1, "max_tokens": 1, "stream": True,
        "stream_options": {"include_usage": False, "include_obfuscation": True},
        "stop": ["a"], "metadata": {"tier": "gold"}, "tools": [], "seed": 3,
    })
    assert req.temperature == 1.0 and req.stream_options is not None
    assert req.stream_options.include_usage is False and req.model_extra == {"tools": [], "seed": 3}
