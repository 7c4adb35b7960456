from typing import Any

import pytest

from schemas.chat_text import MalformedContent, content_text, last_user_index, last_user_text

IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, ("", False)),
        ("", ("", False)),
        ("plain text", ("plain text", False)),
        ([], ("", False)),
        ([{"type": "text", "text": "这张图里"}, IMAGE, {"type": "text", "text": "是什么"}], ("这张图里\n是什么", True)),
        ([IMAGE], ("", True)),
        ([{"type": "text"}], ("", False)),  # a text part without text is empty text
        ([{"type": "input_audio", "input_audio": {}}, {"type": "text", "text": "a"}], ("a", True)),
    ],
)
def test_content_text(content: Any, expected: tuple[str, bool]) -> None:
    assert content_text(content) == expected


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (5, "content must be a string or a list of parts"),
        ({"type": "text", "text": "x"}, "content must be a string or a list of parts"),
        ([{"type": "text", "text": "x"}, "stray"], "content parts must be objects"),
    ],
)
def test_malformed_content_raises(content: Any, message: str) -> None:
    with pytest.raises(MalformedContent, match=message):
        content_text(content)
    assert issubclass(MalformedContent, ValueError)


def test_the_query_is_the_last_message_whose_role_is_user() -> None:
    messages: list[Any] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "an answer"},
        {"role": "user", "content": [{"type": "text", "text": "second"}, IMAGE]},
        {"role": "assistant", "content": None},
        {"content": "no role: not a user message"},
        "not an object",
    ]
    assert last_user_index(messages) == 3
    assert last_user_text(messages) == ("second", True)


@pytest.mark.parametrize("messages", [[], [{"role": "system", "content": "x"}], [{"content": "x"}], ["user"]])
def test_no_user_message_means_no_text(messages: list[Any]) -> None:
    assert last_user_index(messages) is None
    assert last_user_text(messages) == ("", False)


def test_only_the_last_user_message_is_checked() -> None:
    assert last_user_text([{"role": "user", "content": 5}, {"role": "user", "content": "ok"}]) == ("ok", False)
    with pytest.raises(MalformedContent):
        last_user_text([{"role": "user", "content": "ok"}, {"role": "user", "content": [1]}])
