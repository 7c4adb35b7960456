"""What the gateway checks about its callers before routing: request ids, sizes, feedback verdicts.

* **Request ids.** A client's ``X-Request-Id`` (``[A-Za-z0-9._:-]{1,128}``) names the trace the
  first time it is seen; a hostile one (too long, odd characters) is refused with a 400 that
  carries a gateway id. A repeated one never overwrites or loses a trace: the repeat is kept apart
  under ``<client id>~<8 hex>`` (``~`` is outside the client alphabet, so no client id can collide
  with it) and answered in ``x-request-id`` as every trace id is. An id of the gateway's own form
  (``req_`` and 20 hex: :data:`GATEWAY_ID`) is a repeat whenever a client sends it: the gateway
  made it for a request it has traced (a client retrying with the ``x-request-id`` it got back),
  whichever worker or process made it. A client's own id is recognised as a repeat from a bounded
  in-memory ledger (:class:`SeenIds`) and, when workers share their state (``shared.backend:
  redis``), from a claim every worker sees for :data:`CLAIM_TTL_S` (one Redis round trip for a
  request that names its own id; none for one that does not). Not from the store: a read per
  client id would put storage on every such request's path. So an id of the client's reused after
  a restart, or on another worker after the claim expired, is not recognised, and the store keeps
  the first trace of that id (the later one counts in ``routelens_records_duplicates_total{kind="trace"}``).
* **Context length.** A request larger than every candidate's context window (the requested model
  and the fallback model) is OpenAI's 400 ``context_length_exceeded`` and is not forwarded.
* **Feedback.** One verdict per request id (:class:`SeenIds` again; a second is a 409), for a
  request that has a trace, with ``expected_class`` among the configured classes.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from router_core.errors import InvalidRequest
from router_core.intents.rules import CLASSES
from router_core.shared.base import SharedState
from schemas.config import RouteLensConfig
from schemas.fleet import InstanceSpec
from schemas.trace import RequestFeatures

__all__ = ["CLAIM_TTL_S", "CLIENT_ID", "GATEWAY_ID", "RequestIds", "SeenIds", "check_context", "feedback_classes",
           "rejected_features", "repeat_id"]

CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
GATEWAY_ID = re.compile(r"^req_[0-9a-f]{20}$")  # the form of the ids the gateway makes (server.Gateway's new_id)
CLAIM_TTL_S = 300.0  # how long a client's id is known to every worker (a retry comes within it)
_MAX_MODEL = 200


class SeenIds:
    """A bounded, insertion-ordered set of ids: the oldest are forgotten first.

    Args:
        capacity: Ids remembered (each costs about 150 bytes).
    """

    def __init__(self, capacity: int = 200_000) -> None:
        self._ids: dict[str, None] = {}
        self._capacity = capacity

    def __contains__(self, key: object) -> bool:
        return key in self._ids

    def add(self, key: str) -> None:
        """Remember ``key`` (forgetting the oldest id when full)."""
        if len(self._ids) >= self._capacity and key not in self._ids:
            del self._ids[next(iter(self._ids))]
        self._ids[key] = None

    def discard(self, key: str) -> None:
        """Forget ``key``."""
        self._ids.pop(key, None)


def repeat_id(given: str, suffix: Callable[[], str] = lambda: uuid.uuid4().hex[:8]) -> str:
    """Return the id a repeated client id's trace is kept under: ``<given>~<8 hex>`` (at most 128)."""
    return f"{given[:119]}~{suffix()}"


def rejected_features(body: Any) -> RequestFeatures:
    """Features of a request refused before analysis finished: what is known of it, never its text."""
    obj = body if isinstance(body, dict) else {}
    model = obj.get("model", "auto")
    messages = obj.get("messages")
    max_tokens = obj.get("max_completion_tokens")
    max_tokens = obj.get("max_tokens") if max_tokens is None else max_tokens  # a null one is absent
    return RequestFeatures(
        requested_model=model if isinstance(model, str) and 0 < len(model) <= _MAX_MODEL else "",
        n_messages=len(messages) if isinstance(messages, list) else 0,
        input_chars=0,
        est_input_tokens=0,
        max_tokens=max_tokens if isinstance(max_tokens, int) and not isinstance(max_tokens, bool)
        and max_tokens >= 0 else None,
        stream=obj.get("stream") is True,
    )


def check_context(features: RequestFeatures, specs: Iterable[InstanceSpec]) -> None:
    """Refuse a request that no candidate's context window can hold (the context-window filter's sum).

    Raises:
        InvalidRequest: OpenAI's ``context_length_exceeded`` on ``messages``.
    """
    windows = [s.context_window for s in specs]
    need = features.est_input_tokens + (features.max_tokens or 0)
    if not windows or need <= max(windows):
        return
    raise InvalidRequest(
        f"This model's maximum context length is {max(windows)} tokens. However, you requested about {need} "
        f"tokens ({features.est_input_tokens} in the messages, tools and attachments, "
        f"{features.max_tokens or 0} in the completion). "
        "Please reduce the length of the messages or completion.",
        param="messages", code="context_length_exceeded",
    )


def feedback_classes(config: RouteLensConfig) -> frozenset[str]:
    """Classes a verdict may name: the intent classes and every class a model has a quality for."""
    return frozenset(CLASSES).union(*(m.quality for m in config.models.values()))


class RequestIds:
    """The id each request's trace is kept under (see the module docstring).

    Args:
        new_id: The gateway's id factory (for requests without a usable client id).
        shared: The state the gateway's workers share (None: this process is the only one): a client's
            id is claimed there too, so a repeat through another worker is kept apart.
    """

    def __init__(self, new_id: Callable[[], str], shared: SharedState | None = None) -> None:
        self._new_id = new_id
        # Kept apart in this process's memory (bounded), and across workers by a claim: a store lookup per
        # client id would put a storage read on every such request's path (and an outage of the store on it).
        self._seen = SeenIds()
        self.shared = shared

    def of(self, given: str) -> tuple[str, InvalidRequest | None]:
        """The trace id of a request whose ``X-Request-Id`` is ``given`` ("" if none), and a hostile id's refusal."""
        if not given:
            return self._new_id(), None
        if not CLIENT_ID.match(given):
            return self._new_id(), InvalidRequest("X-Request-Id must be 1-128 characters of A-Z a-z 0-9 . _ : -",
                                                  param="X-Request-Id", code="invalid_request_id")
        if given not in self._seen and not GATEWAY_ID.match(given):
            self._seen.add(given)
            return given, None
        return repeat_id(given), None

    async def claimed(self, given: str) -> str:
        """``given`` (a client's id :meth:`of` kept) unless another worker had it within :data:`CLAIM_TTL_S`."""
        if self.shared is None or await self.shared.claim(f"request-id:{given}", CLAIM_TTL_S):
            return given
        return repeat_id(given)
