"""The semantic-fidelity probe: every reference prompt, answers compared with reference answers.

A round sends each reference prompt to the instance (concurrently), reads each answer as the
syntax probe does (a broken answer fails the round with its reason), embeds the answers and
compares each with its reference answer by cosine similarity (all-MiniLM-L6-v2). The round is
``failed`` when any similarity is below its reference's threshold (its own, else
``probes.semantic.threshold``). The result reports the reference with the smallest margin
(similarity minus threshold; with one shared threshold that is the lowest similarity): ``value``
its similarity, ``threshold`` its threshold, ``reference`` its id.

Embedding runs off the event loop in a daemon thread (:func:`in_daemon_thread`), one call at a
time: a process told to stop while the model loads (10 s and more) exits at once, where a default
executor's thread would be joined at exit and keep it alive until the load ends. The reference
answers are embedded once and cached, and so are the last ``cache_size`` answers by their text
(an instance at temperature 0, like the simulator, repeats itself: a repeated answer costs no
model call; a round of six new answers costs ~0.11 CPU-seconds on one thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import aiohttp

from probes.embedder import Embedder, Vectors, cosine
from probes.http import call_chat
from probes.references import Reference
from probes.syntax import read_content
from probes.types import Judgement, Target
from schemas.common import ProbeVerdict
from schemas.config.probes import ProbeSettings

__all__ = ["Round", "SemanticCheck", "in_daemon_thread"]

T = TypeVar("T")

Round = tuple[dict[str, float], Judgement | None, float]  # similarities by reference id, failure, round ms


def in_daemon_thread(fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """Run ``fn(*args)`` in a new daemon thread; the future completes on the running loop.

    Unlike ``asyncio.to_thread`` (the loop's default executor, whose threads the interpreter joins
    at exit), nothing waits for this thread when the process stops.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:  # noqa: BLE001  (handed to the awaiting task)
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits for the answer
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="embed", daemon=True).start()
    return future


class SemanticCheck:
    """Semantic rounds against instances.

    Args:
        settings: The ``probes`` section (timeouts, body cap, marker, ``semantic``).
        embedder: Sentence embeddings (normalised).
        references: The reference prompts and answers.
        perf: Monotonic seconds.
        cache_size: Answers whose embeddings are kept by text (0: none).
    """

    def __init__(self, settings: ProbeSettings, embedder: Embedder, references: Sequence[Reference],
                 perf: Callable[[], float] = time.perf_counter, cache_size: int = 4096) -> None:
        self.settings = settings
        self.embedder = embedder
        self.references = list(references)
        self.perf = perf
        self._lock = asyncio.Lock()
        self._reference_vectors: Vectors | None = None
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._cache_size = cache_size
        self.cache_hits = self.cache_misses = 0  # answers embedded from the cache / anew
        self.scoring_ms: deque[float] = deque(maxlen=10_000)  # per round: embedding the answers, lock wait included

    def threshold(self, ref: Reference) -> float:
        """The threshold ``ref`` is judged against."""
        return ref.threshold if ref.threshold is not None else self.settings.semantic.threshold

    def body(self, ref: Reference, model: str) -> dict[str, Any]:
        """The request body for one reference prompt."""
        return {"model": model, "messages": [{"role": "user", "content": ref.prompt}],
                "max_tokens": self.settings.semantic.max_tokens, "stream": False}

    async def embed(self, texts: list[str]) -> Vectors:
        """Embed ``texts`` in a daemon thread, one embedding call at a time."""
        async with self._lock:
            return await in_daemon_thread(self.embedder.embed, texts)

    async def embed_answers(self, texts: list[str]) -> list[Vectors]:
        """Embed answers, reusing the cached vectors of texts seen lately."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        self.cache_misses += len(missing)
        self.cache_hits += len(texts) - len(missing)
        if missing:
            for text, vector in zip(missing, await self.embed(missing), strict=True):
                self._cache[text] = vector
        out = []
        for text in texts:
            self._cache.move_to_end(text)
            out.append(self._cache[text])
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return out

    async def similarities(self, session: aiohttp.ClientSession, target: Target) -> Round:
        """One round: similarity per reference id, or the failed judgement of a broken answer."""
        s = self.settings
        start = self.perf()
        calls = await asyncio.gather(*(call_chat(session, target, self.body(ref, target.sent_model),
                                                 timeout_s=s.timeout_s, max_bytes=s.max_body_bytes,
                                                 marker_header=s.marker_header, perf=self.perf)
                                       for ref in self.references))
        elapsed = max(0.0, (self.perf() - start) * 1000.0)
        answers: list[str] = []
        for ref, call in zip(self.references, calls, strict=True):
            content, failed = read_content(call)
            if failed is not None:
                return {}, Judgement(ProbeVerdict.FAILED, None, self.threshold(ref),
                                     f"reference {ref.id}: {failed.reason}", failed.error_class,
                                     reference=ref.id, latency_ms=elapsed), elapsed
            assert content is not None
            answers.append(content)
        scoring = self.perf()
        if self._reference_vectors is None:
            self._reference_vectors = await self.embed([ref.answer for ref in self.references])
        got = await self.embed_answers(answers)
        self.scoring_ms.append((self.perf() - scoring) * 1000.0)  # embedding (and its wait for the lock)
        return ({ref.id: cosine(got[i], self._reference_vectors[i]) for i, ref in enumerate(self.references)},
                None, elapsed)

    async def run(self, session: aiohttp.ClientSession, target: Target) -> Judgement:
        """One semantic round judged: ``failed`` when any reference is below its threshold."""
        sims, failed, elapsed = await self.similarities(session, target)
        if failed is not None:
            return failed
        by_id = {ref.id: ref for ref in self.references}
        worst = min(by_id.values(), key=lambda ref: sims[ref.id] - self.threshold(ref))
        value, threshold = sims[worst.id], self.threshold(worst)
        if value >= threshold:
            return Judgement(ProbeVerdict.OK, value, threshold, "", None, reference=worst.id, latency_ms=elapsed)
        below = [ref.id for ref in self.references if sims[ref.id] < self.threshold(ref)]
        return Judgement(ProbeVerdict.FAILED, value, threshold,
                         f"answer drifted: similarity {value:.3f} to reference {worst.id} is below {threshold:.2f}"
                         f" ({len(below)} of {len(self.references)} references below: {', '.join(below)})",
                         "drift", reference=worst.id, latency_ms=elapsed)
