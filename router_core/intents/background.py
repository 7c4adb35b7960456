"""Background text no route set is about: small talk, keyboard mashing and random letters.

It serves three checks, never training: the fast path may not accept a verdict at a confidence that
any random string reaches (so gibberish never skips the embedding path); the slow path abstains on
a query that lies nearer to a background text than to any example of the route it picked, and on
one none of whose words the encoder knows as a word (:func:`is_gibberish`). Small talk that a route
set does cover (a ``chat`` route with "hello" among its examples) is dropped from the background
for that set (:func:`uncovered`), so it still reaches its route.
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection

import numpy as np
import numpy.typing as npt

__all__ = ["SMALL_TALK", "background_texts", "gibberish", "has_cjk", "is_gibberish", "uncovered"]

SMALL_TALK = (
    "hello there", "hi", "hey", "good morning", "good night", "how are you", "how's it going", "what's up",
    "thanks", "thank you so much", "ok", "okay cool", "lol", "haha", "yes", "no", "bye", "see you later",
    "who are you", "what is your name", "are you a robot", "nice to meet you", "i'm bored", "tell me something",
    "test", "testing 123", "hmm", "never mind", "blah blah", "you are great",
)  # Latin script only: MiniLM cannot tell Chinese small talk from Chinese requests (the guard skips CJK queries)
_KEYBOARD = ("asdf", "qwer", "zxcv", "hjkl", "uiop", "jkl;", "qwerty", "asdfgh", "zxcvbn", "wasd", "yxcv")


_WORD = re.compile(r"[a-z]+")
# Short words count only from this list: the vocabulary's two-letter entries are mostly fragments ("bs", "nu").
_SHORT = frozenset("a i am an as at be by do go he hi if in is it me my no of ok on or so to up us we ya yo".split())
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def has_cjk(text: str) -> bool:
    """Whether ``text`` has a CJK ideograph (the embedding guard reads Latin script only)."""
    return _CJK.search(text) is not None


def is_gibberish(text: str, vocabulary: Collection[str]) -> bool:
    """Whether ``text`` has Latin words, no CJK, and not one of its words is a whole word of ``vocabulary``.

    ``vocabulary`` is the encoder's own word list (MiniLM's WordPiece vocabulary: about 20,000 whole
    English words); random letters and keyboard runs are split into pieces, never found whole.
    """
    if not vocabulary or has_cjk(text):  # no word list (a test's fake encoder): nothing is gibberish
        return False
    words = _WORD.findall(text.lower())
    return bool(words) and not any(w in _SHORT if len(w) < 3 else w in vocabulary for w in words)


def gibberish(n: int, seed: int) -> list[str]:
    """``n`` strings of random letters and keyboard runs (seeded), one to four 'words' each."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(n):
        words = []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.3:
                words.append(rng.choice(_KEYBOARD))
            else:
                words.append("".join(rng.choice(letters) for _ in range(rng.randint(2, 7))))
        out.append(" ".join(words))
    return out


def background_texts(seed: int, n_random: int = 40) -> list[str]:
    """The small talk, the keyboard runs and ``n_random`` random strings."""
    return [*SMALL_TALK, " ".join(_KEYBOARD[:3]), *_KEYBOARD, *gibberish(n_random, seed)]


def uncovered(background: npt.NDArray[np.float32], examples: npt.NDArray[np.float32], cover: float) -> list[int]:
    """Indexes of background rows whose cosine to every route example stays below ``cover``."""
    if len(background) == 0 or len(examples) == 0:
        return list(range(len(background)))
    nearest = (background @ examples.T).max(axis=1)
    return [i for i, s in enumerate(nearest) if s < cover]
