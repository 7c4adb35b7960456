"""Background text no route set is about: small talk, keyboard mashing and random letters.

It serves these checks, never training: the fast path may not accept a verdict at a confidence that
any random string reaches (so gibberish never skips the embedding path); the slow path abstains on
a query that lies nearer to a background text than to any example of the route it picked, and on
one none of whose words the encoder knows as a word (:func:`is_gibberish`). Small talk that a route
set does cover (a ``chat`` route with "hello" among its examples) is dropped from the background
for that set (:func:`uncovered`), so it still reaches its route.

Two checks read the text alone: a query with no letter or digit at all (empty, spaces,
punctuation, emoji) is never classified (:func:`is_wordless`), and Chinese small talk is matched
against a word list (:func:`is_small_talk_zh`), since MiniLM cannot tell it from Chinese requests
by meaning; a route set some of whose examples open with it (:func:`covers_small_talk_zh`) keeps it.
Chinese gibberish (random characters) is not detected: each common character is a whole word of
MiniLM's vocabulary, and nothing installed tells a random run of them from a sentence.
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection

import numpy as np
import numpy.typing as npt

__all__ = ["SMALL_TALK", "SMALL_TALK_ZH", "background_texts", "covers_small_talk_zh", "gibberish", "has_cjk",
           "is_gibberish", "is_small_talk_zh", "is_wordless", "uncovered"]

SMALL_TALK = (
    "hello there", "hi", "hey", "good morning", "good night", "how are you", "how's it going", "what's up",
    "thanks", "thank you so much", "ok", "okay cool", "lol", "haha", "yes", "no", "bye", "see you later",
    "who are you", "what is your name", "are you a robot", "nice to meet you", "i'm bored", "tell me something",
    "test", "testing 123", "hmm", "never mind", "blah blah", "you are great",
)  # Latin script: the embedding guard skips CJK queries (MiniLM cannot tell Chinese small talk from requests)
# Matched whole, clause by clause (punctuation, spaces and trailing particles aside): "谢谢！", "好的，谢谢啦".
SMALL_TALK_ZH = frozenset((
    "你好 您好 你们好 大家好 嗨 哈喽 哈啰 早 早上好 早安 上午好 中午好 下午好 晚上好 晚安 你好吗 最近好吗 在吗 在不在 "
    "谢谢 谢谢你 谢谢您 多谢 感谢 非常感谢 太感谢了 谢啦 不客气 没关系 不好意思 再见 拜拜 回见 下次见 明天见 "
    "好的 好 行 可以 嗯 哦 噢 对 是的 没事 算了 知道了 明白了 收到 ok 好吧 "
    "你是谁 你叫什么 你叫什么名字 你是机器人吗 你是人吗 测试 测试一下 无聊 好无聊 你真棒 辛苦了").split())
_KEYBOARD = ("asdf", "qwer", "zxcv", "hjkl", "uiop", "jkl;", "qwerty", "asdfgh", "zxcvbn", "wasd", "yxcv")


_WORD = re.compile(r"[a-z]+")
# Short words count only from this list: the vocabulary's two-letter entries are mostly fragments ("bs", "nu").
_SHORT = frozenset("a i am an as at be by do go he hi if in is it me my no of ok on or so to up us we ya yo".split())
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_CLAUSES = re.compile(r"[^\w]+|_+")  # splits at punctuation, symbols and spaces (CJK punctuation included)
_PARTICLES = "啊呀哦喔吧呢啦嘛哈嘞咯哟"
_INTERJECTION = re.compile(r"[哈呵嘿嘻嗯啊哦噢呀]+")  # "哈哈哈", "嗯嗯", "啊啊啊": a run of them is small talk


def has_cjk(text: str) -> bool:
    """Whether ``text`` has a CJK ideograph (the embedding guard reads Latin script only)."""
    return _CJK.search(text) is not None


def is_wordless(text: str) -> bool:
    """Whether ``text`` has no letter or digit of any script (empty, spaces, punctuation, emoji): nothing to route."""
    return not any(ch.isalnum() for ch in text)


def is_gibberish(text: str, vocabulary: Collection[str]) -> bool:
    """Whether ``text`` is wordless, or has Latin words, no CJK, and not one of them is a whole word of ``vocabulary``.

    ``vocabulary`` is the encoder's own word list (MiniLM's WordPiece vocabulary: about 20,000 whole
    English words); random letters and keyboard runs are split into pieces, never found whole.
    """
    if is_wordless(text):
        return True
    if not vocabulary or has_cjk(text):  # no word list (a test's fake encoder): only wordless text is gibberish
        return False
    words = _WORD.findall(text.lower())
    return bool(words) and not any(w in _SHORT if len(w) < 3 else w in vocabulary for w in words)


def _clauses(text: str) -> list[str]:
    return [c for c in _CLAUSES.split(text.lower()) if c]


def _is_small_talk_clause(clause: str) -> bool:
    if clause in SMALL_TALK_ZH or _INTERJECTION.fullmatch(clause):
        return True
    stripped = clause.rstrip(_PARTICLES)  # "你好呀", "谢谢啦"
    return bool(stripped) and stripped in SMALL_TALK_ZH


def is_small_talk_zh(text: str) -> bool:
    """Whether ``text`` has CJK and each of its clauses is Chinese small talk ("谢谢", "你好呀", "好的，谢谢！")."""
    clauses = _clauses(text)
    return has_cjk(text) and bool(clauses) and all(_is_small_talk_clause(c) for c in clauses)


def covers_small_talk_zh(examples: Collection[str]) -> bool:
    """Whether some example opens with a clause of Chinese small talk ("你好，今天过得怎么样"): the set is about it."""
    for text in examples:
        clauses = _clauses(text)
        if clauses and has_cjk(clauses[0]) and _is_small_talk_clause(clauses[0]):
            return True
    return False


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
