"""The gateway's semantic intents classifier: fitted on a thread at start, refitted when its inputs change.

One :class:`LiveIntents` per policy gate with ``routing.intents``. At start the routes load at once
(a bad routes file stops the start) and the embedding path fits on a thread; until it is done a
query on the slow path waits for it (:meth:`IntentClassifier.classify` fits first). Afterwards a
change to the routes file (``routelens intents add``, an edit) or to the settings (a reloaded
``routing.intents``) is refitted on a thread of its own while the classifier in force keeps
serving; the new one is handed over on the event loop, whole (:attr:`LiveIntents.serving`), so
the verdict of a request and the policy its trace names come from the same classifier. A refit
that fails keeps the classifier in force and says why in :attr:`LiveIntents.reload_error`.

Each fit logs one line when it starts (routes, examples, what the cache already holds) and one
when it is live (seconds); :meth:`LiveIntents.state` is what ``/v1/router/state`` shows.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from schemas.config.intents import IntentSettings

if TYPE_CHECKING:  # scikit-learn, numpy and the model load only when semantic intents are configured
    from router_core.intents import IntentClassifier
    from router_core.intents.embedding import Embedder

__all__ = ["LiveIntents", "Serving", "Status"]

log = logging.getLogger(__name__)

Status = Literal["fitting", "ready", "failed"]
_Stamp = tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class Serving:
    """The classifier in force and what it was fitted from (swapped whole)."""

    classifier: IntentClassifier
    settings: IntentSettings
    key: str  # the routes' and settings' content hash: the policy book keys its documents on it
    routes: int
    examples: int
    cache: str  # what the cache beside the routes file held when the fit began


def _stamp(path: Path) -> _Stamp:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _error(exc: BaseException) -> str:
    from schemas.errors import ConfigError

    return str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"


class LiveIntents:
    """The serving intents classifier of one gate, and its refits.

    Args:
        settings: ``routing.intents`` (the routes path absolute, or relative to the working folder).
        clock: Seconds for the fits' durations (injected for tests).
    """

    def __init__(self, settings: IntentSettings, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.settings = settings  # as wanted now: the configuration's (a refit follows a change)
        self.serving: Serving | None = None
        self.fit_s: float | None = None  # the serving classifier's fit, once done
        self.refits = 0  # refitted classifiers put in force since start
        self.reload_error: str | None = None  # the last refit's failure (the serving classifier stays)
        self._clock = clock
        self._refitting = False
        self._failed: str | None = None  # why the serving classifier's own fit failed
        self._tried: tuple[_Stamp, IntentSettings] | None = None  # the routes file and settings of the last fit
        self._encoder: Embedder | None = None
        self._encoder_key: tuple[Any, ...] | None = None

    @classmethod
    def start(cls, settings: IntentSettings) -> LiveIntents:
        """Load the routes and build the classifier now; fit its embedding path on a thread.

        Raises:
            ConfigError: The routes file does not load (the gateway does not start).
        """
        live = cls(settings)
        stamp = _stamp(Path(settings.routes))
        serving = live._build(settings)
        live._tried = (stamp, settings)
        live.serving = serving
        if live._needs_fit(serving):
            threading.Thread(target=live._first_fit, args=(serving,), name="intents-fit", daemon=True).start()
        else:
            live.fit_s = 0.0
            log.info("intents: ready (%s), %s", _shape(serving), _fast_only(serving))
        return live

    @property
    def classifier(self) -> IntentClassifier | None:
        """The classifier in force (None: none yet, when ``routing.intents`` came with a reload)."""
        return None if self.serving is None else self.serving.classifier

    @property
    def status(self) -> Status:
        """``fitting`` (requests for auto wait), ``ready``, or ``failed`` (no fitted classifier serves)."""
        serving = self.serving
        if serving is None:
            return "failed" if self.reload_error is not None and not self._refitting else "fitting"
        # A refit is put in force fitted, with its fit_s; the first fit is done once its fit_s is said too
        # (the classifier is fitted a moment before: a state read between them must not say ready without it).
        if self._needs_fit(serving) and (not serving.classifier.is_fitted or self.fit_s is None):
            return "failed" if self._failed is not None else "fitting"
        return "ready"

    @property
    def fit_error(self) -> str | None:
        """Why the serving classifier's own fit failed (queries on the embedding path retry it), or None."""
        return self._failed

    def state(self) -> dict[str, Any]:
        """What ``/v1/router/state`` shows under ``intents``."""
        s = self.serving
        clf = None if s is None else s.classifier
        return {
            "status": self.status, "routes_file": str(self.settings.routes),
            "routes": None if s is None else s.routes, "examples": None if s is None else s.examples,
            "cache": None if s is None else s.cache, "fit_s": self.fit_s,
            "embedding": None if clf is None else ((clf.embedding_status or "on") if clf.settings.escalate else "off"),
            "fit_error": self._failed, "refitting": self._refitting, "refits": self.refits,
            "reload_error": self.reload_error,
        }

    def want(self, settings: IntentSettings) -> None:
        """Take the configuration's ``routing.intents`` (a reload): refitted when they changed."""
        self.settings = settings
        self.check()

    def check(self) -> bool:
        """Start a refit when the routes file or the settings changed since the last fit began; True when started.

        One refit runs at a time; a change made meanwhile is taken by the next check after it.
        """
        if self._refitting:
            return False
        settings = self.settings
        now = (_stamp(Path(settings.routes)), settings)
        if now == self._tried:
            return False
        why = "routing.intents changed" if self._tried is None or self._tried[1] != settings else "routes file changed"
        self._tried = now
        self._refitting = True
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a test, a CLI): the new classifier is put in force by the thread
            loop = None
        threading.Thread(target=self._refit, args=(settings, why, loop), name="intents-refit", daemon=True).start()
        return True

    def _needs_fit(self, serving: Serving) -> bool:
        return serving.classifier.has_embedding and serving.settings.escalate

    def _embedder(self, settings: IntentSettings) -> Embedder | None:
        """MiniLM as ``settings`` read it, the same one across refits (loaded once); None when not installed."""
        from router_core.intents.embedding import embedder_missing
        from router_core.intents.minilm import MiniLMEncoder

        if embedder_missing() is not None:
            return None  # the classifier says why (embedding_status)
        key = (settings.embedding_precision, settings.embedding_max_tokens, settings.early_exit_layers)
        if self._encoder is None or self._encoder_key != key:
            self._encoder = MiniLMEncoder(settings.embedding_precision, max_seq_length=settings.embedding_max_tokens,
                                          early_layers=settings.early_exit_layers)
            self._encoder_key = key
        return self._encoder

    def _build(self, settings: IntentSettings, *, announce: str | None = None) -> Serving:
        """Load the routes and build the classifier (its fast path fitted); ``announce``: log the fit's start first."""
        from router_core.intents import IntentClassifier, cache_path_for, load_routes

        path = Path(settings.routes)
        routes = load_routes(path)
        embedder = self._embedder(settings)
        cache = _cache_note(routes, cache_path_for(path), embedder, settings)
        examples = sum(len(t) for t in routes.values())
        if announce is not None:
            log.info("intents: %s: fitting %d routes, %d examples from %s (%s); the classifier in force serves "
                     "meanwhile", announce, len(routes), examples, path.name, cache)
        clf = IntentClassifier(routes, settings, cache_path=cache_path_for(path), embedder=embedder)
        key = hashlib.sha256(json.dumps([routes, settings.model_dump(mode="json")], sort_keys=True,
                                        ensure_ascii=False).encode("utf-8")).hexdigest()[:16]
        return Serving(clf, settings, key, len(routes), examples, cache)

    def _first_fit(self, serving: Serving) -> None:
        t0 = self._clock()
        log.info("intents: fitting %s (%s); requests for auto wait for it", _shape(serving),
                 serving.cache)
        try:
            serving.classifier.fit_embedding()
        except Exception as exc:  # noqa: BLE001  (said in the state and on /health; queries retry the fit)
            error = _error(exc)
            log.error("intents: the fit failed after %.1f s: %s", self._clock() - t0, error)
            if self.serving is serving:  # not replaced by a refit meanwhile
                self._failed = error
        else:
            seconds = round(self._clock() - t0, 3)
            log.info("intents: ready in %.1f s (%s)", seconds, _shape(serving))
            if self.serving is serving:
                self.fit_s = seconds

    def _refit(self, settings: IntentSettings, why: str, loop: asyncio.AbstractEventLoop | None) -> None:
        t0 = self._clock()
        new: Serving | None = None
        error: str | None = None
        try:
            new = self._build(settings, announce=why)
            if self._needs_fit(new):
                new.classifier.fit_embedding()
        except Exception as exc:  # noqa: BLE001  (any failure keeps the classifier in force, and says why)
            error = _error(exc)
        done = (new, error, round(self._clock() - t0, 3))
        if loop is None:
            self._done(*done)
            return
        try:
            loop.call_soon_threadsafe(self._done, *done)  # on the loop: no request sees half a swap
        except RuntimeError:  # the loop has closed: the gateway stopped meanwhile
            pass

    def _done(self, new: Serving | None, error: str | None, seconds: float) -> None:
        self._refitting = False
        if new is None:
            self.reload_error = error
            log.error("intents: not refitted (the classifier in force stays): %s", error)
            return
        self.serving, self.fit_s, self._failed, self.reload_error = new, seconds, None, None
        self.refits += 1
        log.info("intents: refitted classifier live after %.1f s (%s)", seconds, _shape(new))


def _shape(serving: Serving) -> str:
    return f"{serving.routes} routes, {serving.examples} examples from {Path(serving.settings.routes).name}"


def _fast_only(serving: Serving) -> str:
    clf = serving.classifier
    return f"fast path only: {clf.embedding_status}" if clf.embedding_status else "fast path only: escalate is off"


def _cache_note(routes: dict[str, list[str]], path: Path, embedder: Embedder | None, settings: IntentSettings) -> str:
    """How many routes the cache beside the routes file holds as they are now (their embeddings are not redone)."""
    from router_core.intents import CentroidCache, route_hash
    from router_core.intents.minilm import MODEL_NAME

    if embedder is None or not settings.escalate:
        return "no embedding path: no cache"
    if not path.exists():
        return "no cache yet"
    cache = CentroidCache.load(path, getattr(embedder, "model_id", MODEL_NAME))
    hits = sum(1 for r, ts in routes.items() if (e := cache.routes.get(r)) is not None and e.hash == route_hash(ts))
    return f"{hits} of {len(routes)} routes cached"
