"""The gateway's routing policy: the live rule set, its throttles, and the request as conditions see it.

One :class:`PolicyGate` per gateway. The rule set is swapped whole when the policy file changes
and still compiles (a file that does not keeps the last good one, and says why in
``last_error``); the semantic intents classifier is refitted when its routes file or settings
change (:mod:`router_core.gateway.live_intents`). Matching is pure; the throttle is the only
state, and the only await.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo

from router_core.decide.analysis import Analysis, estimate_tokens
from router_core.decide.attachments import attachment_infos
from router_core.gateway.live_intents import LiveIntents, Serving
from router_core.gateway.policy_file import PolicyFile, _stamp, policy_path
from router_core.metrics.throttles import ThrottleMetrics
from router_core.resilience.client_throttle import ClientThrottle
from router_core.resilience.prefilter import Prefilter, Refusal
from router_core.rules.ir import ClauseVerdict, Match, RuleSet
from router_core.rules.keywords import KeywordScorer
from router_core.rules.load import load_policy
from router_core.rules.request import RequestView
from router_core.rules.route import KEYWORDS_RULE, NO_RULES, RouteChoice, keyword_rule
from router_core.rules.throttle import Admission, Throttles
from router_core.shared.base import MemoryShared, SharedState
from schemas.config import RouteLensConfig
from schemas.config.intents import IntentSettings
from schemas.fleet import InstanceSnapshot

if TYPE_CHECKING:  # scikit-learn and numpy load only when semantic intents are configured
    from router_core.intents import IntentClassifier
    from schemas.trace_policy import IntentVerdict

__all__ = ["PolicyGate", "Understood", "policy_path"]

log = logging.getLogger(__name__)
_FIT_POLL_S = 0.05  # how often a query waiting for the intents' first fit looks whether it is done


@dataclass(frozen=True, slots=True)
class Understood:
    """What the policy made of a request: its intent, the rule it matched, the policy step's extras."""

    intent: str | None
    confidence: float | None
    choice: RouteChoice | None
    extra: dict[str, Any]


def _query_tokens(text: str) -> int:
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf")
    return estimate_tokens(cjk, len(text) - cjk)


class PolicyGate(PolicyFile):
    """The live rule set and its throttles.

    Args:
        config: The configuration (``routing`` is read).
        rules: The compiled rule set (None: no policy file; every method is then a no-op).
        path: The policy file, watched for changes when given.
        clock: Monotonic seconds for the throttles and the wait for the intents' first fit (injected).
        shared: Where replicas share the throttles' buckets (None: this process's own).
        hash_key: The query hash's HMAC key (``router.hash_key_env``'s), which keys the fingerprints
            of the header and metadata values an explanation withholds (None: plain SHA-256).
    """

    def __init__(self, config: RouteLensConfig, rules: RuleSet | None, *, path: Path | None = None,
                 clock: Callable[[], float] = time.monotonic, intents: LiveIntents | None = None,
                 shared: SharedState | None = None, hash_key: str | None = None) -> None:
        self.config = config
        self.hash_key = hash_key
        self._fingerprint_key = None if hash_key is None else hash_key.encode("utf-8")
        self.rules = rules
        self.path = path
        self.live_intents = intents  # routing.intents: the classifier in force and its refits
        kw = config.routing.keywords
        self.keywords = None if kw is None else KeywordScorer(kw)
        self._clock = clock
        self.throttles = Throttles(clock, shared)
        self.throttle_metrics: ThrottleMetrics | None = None  # set by count_throttles (the gateway's registry)
        # The guards before analysis (throttles.prefilter, .client, .shedding), on the same shared state.
        self.shared: SharedState = shared or MemoryShared(clock)
        t = config.throttles
        self.prefilter = None if t.prefilter is None else Prefilter(t.prefilter)
        self.client_throttle = ClientThrottle(t, self.shared) if t.client or t.shedding else None
        self.last_error: str | None = None
        self._zones: dict[str, ZoneInfo] = {}
        self._seen = None if path is None else _stamp(path)  # the file as last loaded (see check)

    @classmethod
    def load(cls, config: RouteLensConfig, **kw: Any) -> PolicyGate:
        """Build the gate for ``config``'s policy file.

        Raises:
            PolicyError: The policy file does not load (the gateway does not start).
        """
        path = policy_path(config)
        intents = config.routing.intents
        if intents is not None and "intents" not in kw:  # routes loaded now; fitted on a thread, not on a request
            kw["intents"] = LiveIntents.start(intents)
        return cls(config, None if path is None else load_policy(path, config), path=path, **kw)

    def count_throttles(self, metrics: ThrottleMetrics) -> None:
        """Count what the rules' throttles do in ``metrics`` (``routelens_rule_throttle_requests_total``...)."""
        self.throttle_metrics = metrics
        self._declare_throttles()

    def reload(self) -> bool:
        """Re-read the policy file (:meth:`PolicyFile.reload`); a new throttled rule's series show at 0."""
        swapped = super().reload()
        if swapped:
            self._declare_throttles()
        return swapped

    def _declare_throttles(self) -> None:
        if self.throttle_metrics is not None and self.rules is not None:
            for rule in self.rules.rules:
                if rule.throttle is not None:
                    self.throttle_metrics.declare(rule.name, rule.throttle.overflow)

    @property
    def intents(self) -> IntentClassifier | None:
        """The semantic intents classifier in force (None: no ``routing.intents``, or none fitted yet)."""
        return None if self.live_intents is None else self.live_intents.classifier

    @property
    def intents_serving(self) -> Serving | None:
        """The classifier in force with the settings and routes it was fitted from (read once, swapped whole)."""
        return None if self.live_intents is None else self.live_intents.serving

    def set_intents(self, settings: IntentSettings | None) -> None:
        """Take a reloaded ``routing.intents``: refitted in the background when changed, dropped when gone."""
        live = self.live_intents
        if settings is None:
            if live is not None:
                log.warning("routing.intents removed: semantic intents are no longer classified")
                self.live_intents = None
            return
        if live is None:  # added: the rule layer decides intents until the first fit is in force
            self.live_intents = live = LiveIntents(settings)
        live.want(settings)

    @property
    def active(self) -> bool:
        """Whether there is anything to run: a rule set, semantic intents or keyword scoring."""
        return self.rules is not None or self.intents is not None or self.keywords is not None

    async def understand(self, analysis: Analysis, body: Mapping[str, Any], headers: Mapping[str, str],
                         now: datetime, state: Callable[[], Mapping[str, InstanceSnapshot]], *,
                         rules: RuleSet | None = None, explain: Literal["matched", "all"] = "matched",
                         ) -> Understood:
        """Intent (semantic, else the rule layer's), keyword score, and the rule the request matches.

        The embedding path, when the fast path is unsure, runs on a worker thread: the event loop
        never waits on a model. ``rules`` replaces the live rule set (a dry run's own policy);
        ``explain="all"`` records every tried rule's atoms, not only the matching one's.
        """
        intent, confidence = analysis.intent.cls, analysis.intent.confidence
        zone = self.zone(rules or self.rules)
        extra: dict[str, Any] = {}
        if analysis.attachments:
            extra["attachments"] = attachment_infos(analysis.attachments)
        if (verdict := await self._intent(analysis.query_text)) is not None:
            extra["intent"] = verdict.model_dump()
            if verdict.label is not None:  # abstained: the rule layer's intent stands, and the trace says so
                intent, confidence = verdict.label, verdict.confidence
        score, by_keywords = None, None
        if self.keywords is not None:
            kw = self.keywords
            target = self.config.routing.keywords.target if self.config.routing.keywords else ""
            ids = [s.id for s in self.config.fleet.instances if s.model == target]
            res = kw.score(analysis.query_text, intent=intent, intent_confidence=confidence, snapshots=state(),
                           instances_of_target=ids)
            score = res.score
            extra["keywords"] = [m.model_dump() for m in res.matches]
            extra["keyword_score"] = res.score
            if res.routed_to is not None:
                by_keywords = keyword_rule(res.routed_to)
        view = self.view(analysis, body, headers, now.astimezone(zone), intent=intent, intent_confidence=confidence,
                         keyword_score=score)
        choice = self.choose(view, rules=rules, explain=explain)
        del view  # it holds the prompt
        if by_keywords is not None and (choice is None or choice.rule is None):
            rules = choice.rules if choice is not None else NO_RULES
            tried = choice.match.tried if choice is not None else ()
            choice = RouteChoice(rules, Match(by_keywords, (*tried, ClauseVerdict(KEYWORDS_RULE, True))),
                                 local_hour=now.astimezone(zone).hour)
        if choice is None and extra:  # no policy file: the step still records intent and keywords
            choice = RouteChoice(NO_RULES, Match(None, ()), local_hour=now.astimezone(zone).hour)
        return Understood(intent, confidence, choice, extra)

    async def _intent(self, text: str) -> IntentVerdict | None:
        """The verdict of the classifier in force when this returns (the one the trace's policy hash names).

        The slow path (and, before the first fit is done, the fit) runs off the event loop. A refit
        is put in force on the loop, so only during that await can it change: the new one decides then.
        """
        verdict = None
        for _ in range(3):  # each swap is a whole refit (seconds): a third one during one query is not waited for
            clf = self.intents
            if clf is None:
                return None
            verdict = clf.fast_verdict(text)
            if verdict is None:
                fitting, t0 = not clf.is_fitted, self._clock()
                await self._first_fit(clf)
                verdict = await asyncio.get_running_loop().run_in_executor(None, partial(clf.classify, text))
                if fitting:  # the first fit: the trace says how long the query waited for it
                    verdict = verdict.model_copy(update={"waited_s": round(max(self._clock() - t0, 0.0), 3)})
            if self.intents is clf:
                break
        return verdict

    async def _first_fit(self, clf: IntentClassifier) -> None:
        """Wait on the loop while the first fit of ``clf`` runs on its own thread.

        Not in an executor thread: waiting there, each query held one of the loop's few default
        threads, which the feedback and trace lookups also run on, until the fit was done.
        """
        live = self.live_intents
        while not clf.is_fitted and live is not None and live.status == "fitting" and live.classifier is clf:
            await asyncio.sleep(_FIT_POLL_S)

    async def screen(self, body: Mapping[str, Any], headers: Mapping[str, str], remote: str | None,
                     ) -> Refusal | None:
        """The client and shedding buckets (429), then the prefilter (400); None: the request goes on.

        The buckets come first: a client flooding the gateway is refused for the price of a token
        take, and its malicious requests count against its bucket too.
        """
        if self.client_throttle is not None and (refusal := await self.client_throttle.admit(headers, remote)):
            return refusal
        return None if self.prefilter is None else self.prefilter.check(body)

    def zone(self, rules: RuleSet | None) -> ZoneInfo:
        """Where a rule set reads the hour: the policy file's own ``timezone``, else ``routing.timezone``."""
        name = rules.timezone if rules is not None else self.config.routing.timezone
        got = self._zones.get(name)
        if got is None:
            got = self._zones[name] = ZoneInfo(name)
        return got

    def view(self, analysis: Analysis, body: Mapping[str, Any], headers: Mapping[str, str], now: datetime,
             *, intent: str | None, intent_confidence: float | None, keyword_score: float | None = None,
             ) -> RequestView:
        """The request as conditions read it (the prompt in memory only); ``now`` in the rules' zone (:meth:`zone`)."""
        feats = analysis.features
        meta = body.get("metadata")
        return RequestView(
            input_length=feats.est_input_tokens, query_length=_query_tokens(analysis.query_text),
            language=feats.language.value, intent=intent, intent_confidence=intent_confidence,
            file_types=tuple(getattr(feats, "file_types", ()) or ()), has_attachments=feats.has_attachments,
            request_time=now, headers={k.lower(): v for k, v in headers.items()},
            metadata=meta if isinstance(meta, dict) else {}, prompt=analysis.query_text, keyword_score=keyword_score,
            fingerprint_key=self._fingerprint_key,
        )

    def choose(self, view: RequestView, *, rules: RuleSet | None = None,
               explain: Literal["matched", "all"] = "matched") -> RouteChoice | None:
        """Match ``view`` against the live rule set (or ``rules``); None without a policy."""
        rs = rules or self.rules
        if rs is None:
            return None
        return RouteChoice(rules=rs, match=rs.match(view, explain=explain), local_hour=view.request_time.hour)

    async def admit(self, choice: RouteChoice | None) -> tuple[RouteChoice | None, Admission]:
        """Apply the matched rule's throttle: admitted, sent down the chain, or refused (``reject``).

        A request that queued for a token (``overflow: wait``) carries the time it waited in the route
        (``waited_s``, for the trace's policy step), whether a token came or ``max_wait`` ran out. What the
        throttle did is counted in :attr:`throttle_metrics`, when set (:meth:`count_throttles`).
        """
        if choice is None or choice.rule is None or choice.rule.throttle is None:
            return choice, Admission(True)
        adm = await self.throttles.admit(choice.rule)
        if self.throttle_metrics is not None:  # routelens_rule_throttle_requests_total, ..._throttle_wait_seconds
            self.throttle_metrics.record_throttle(choice.rule.name, adm.action, adm.waited_s)
        if adm.action is None:
            return choice, adm
        if adm.action == "chain":
            return RouteChoice(choice.rules, choice.match, choice.local_hour, skip_primary=True,
                               throttled="chain"), adm
        return RouteChoice(choice.rules, choice.match, choice.local_hour, throttled=adm.action,
                           waited_s=adm.waited_s), adm

