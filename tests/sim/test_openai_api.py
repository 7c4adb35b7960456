from sim.openai_api import ApiError, ChatRequest, parse_chat_request


def test_content_parts_give_their_text_and_attachments_are_left_out() -> None:
    parts = [{"type": "text", "text": "first"}, {"type": "image_url", "image_url": {"url": "data:,"}},
             {"type": "text", "text": "second"}]
    req = parse_chat_request({"messages": [{"role": "user", "content": parts}]}, context_window=1000)
    assert isinstance(req, ChatRequest) and req.turns == (("user", "first\nsecond"),)


def test_content_of_the_wrong_shape_is_a_400_naming_the_message() -> None:
    for content in (["not an object"], 5, {"type": "text"}):
        err = parse_chat_request({"messages": [{"role": "system", "content": "s"},
                                               {"role": "user", "content": content}]}, context_window=1000)
        assert isinstance(err, ApiError) and err.status == 400
        assert (err.param, err.code) == ("messages[1].content", "invalid_type")
