import numpy as np
import pytest

from router_core.intents.background import background_texts, gibberish, is_gibberish, uncovered

VOCAB = frozenset({"hello", "there", "refund", "card", "the", "weather", "bs", "nu"})


@pytest.mark.parametrize(("text", "expected"), [
    ("asdf qwer zxcv", True), ("bs nu", True),  # two-letter vocabulary entries are fragments, not words
    ("hello there", False), ("my card", False), ("ok", False), ("退款", False), ("asdf 退款", False),
    ("12345 !!", False), ("", True), ("?? !", True)])  # no letter or digit at all: gibberish, whatever the vocabulary
def test_gibberish_is_text_with_no_known_word(text: str, expected: bool) -> None:
    assert is_gibberish(text, VOCAB) is expected


def test_without_a_vocabulary_nothing_is_gibberish() -> None:
    assert not is_gibberish("asdf qwer", frozenset())


def test_random_strings_are_seeded() -> None:
    assert gibberish(20, 1) == gibberish(20, 1) != gibberish(20, 2)
    assert len(background_texts(0, n_random=5)) == len(background_texts(0, n_random=0)) + 5


def test_background_covered_by_a_route_is_dropped() -> None:
    background = np.eye(3, dtype=np.float32)
    examples = np.array([[0.9, 0.1, 0.0]], dtype=np.float32)
    assert uncovered(background, examples, cover=0.7) == [1, 2]
    assert uncovered(background, examples[:0], cover=0.7) == [0, 1, 2]
