"""The router: live state, plugins (filters, scorers, pickers), the decision, and replay.

The names in :data:`__all__` are the package's public face: the app imports them from
``router_core`` itself, never from a submodule (``tests/test_import_rules.py``). Those the router
itself needs load with the package; the others (the gateway and its aiohttp server, the Redis
client, the semantic intents and their scikit-learn, the policy-file tooling) load on first use
(PEP 562), so a command that needs none of them does not pay for them.
"""

from typing import TYPE_CHECKING

from router_core.decide.builtin import build_router, builtin_registry, register_builtin
from router_core.decide.decision import Decision, DecisionContext
from router_core.decide.policy import Policy, build_policy, policy_hash
from router_core.decide.policy_doc import from_document
from router_core.decide.prepared import Prepared
from router_core.decide.replay import NotReplayable, Replay, redecide, replay, route_of, settled
from router_core.decide.router import AUTO_MODEL, Ranked, Router, rule_of
from router_core.decide.verify import Difference, first_difference
from router_core.errors import (
    AttemptsExhausted,
    InvalidRequest,
    NoFeasibleInstance,
    PluginConfigError,
    PluginError,
    PolicyError,
    ProfileError,
    RoutingError,
    UnknownModel,
    UnknownPluginType,
)
from router_core.framework import Candidate, PluginRegistry, Scored
from router_core.lazy import lazy_getattr
from router_core.rules.route import expected_tokens
from router_core.scorers.latency import predicted_latency_ms
from router_core.state.quality import QualitySnapshot, QualityTable
from router_core.state.staleness import DECAYING_GAUGES

if TYPE_CHECKING:
    from router_core.aio import cancel_all
    from router_core.config_file import read_config
    from router_core.decide.analysis import analyse_request
    from router_core.experiments import arm_config
    from router_core.gateway import Gateway
    from router_core.gateway.auth import keys_from_env, open_notice, upstream_keys
    from router_core.gateway.errors import ParseErrorsJson, ParseErrorsQuiet
    from router_core.gateway.openapi import OpenApi
    from router_core.gateway.ops_routes import add_worker_metrics
    from router_core.gateway.peers import WorkerPeers
    from router_core.gateway.policy_gate import PolicyGate
    from router_core.gateway.probe_source import ProbeSource, VerdictFollower
    from router_core.gateway.probe_source import feed_body as probe_feed_body
    from router_core.intents import IntentClassifier, append_examples
    from router_core.intents.baseline import CentroidBaseline
    from router_core.intents.embedding import embedder_missing
    from router_core.intents.minilm import MiniLMEncoder
    from router_core.intents.rules import classify_intent
    from router_core.pickers._tiebreak import tie_key
    from router_core.pickers.max_score import MaxScorePicker
    from router_core.rules.cases import CaseResult, run_cases
    from router_core.rules.cases import explain as explain_case
    from router_core.rules.cases import view_of as case_view
    from router_core.rules.ir import Match as RuleMatch
    from router_core.rules.ir import RuleSet
    from router_core.rules.load import compile_policy
    from router_core.rules.load import load_policy as load_rules
    from router_core.scorers.cost import CostScorer
    from router_core.scorers.quality import QualityScorer
    from router_core.shared.redis_shared import RedisShared
    from router_core.shared.wiring import SharedCollector, build_shared
    from router_core.state.parse import MetricsParseError, parse_engine_metrics
    from router_core.state.scrape_round import ScrapeResult, decode_round, encode_round
    from router_core.state.scraper import MetricsScraper

# public name loaded on first use -> its module ("module:name" when defined there under another name)
_LAZY: dict[str, str] = {
    "CaseResult": "router_core.rules.cases",
    "CentroidBaseline": "router_core.intents.baseline",
    "CostScorer": "router_core.scorers.cost",
    "Gateway": "router_core.gateway",
    "IntentClassifier": "router_core.intents",
    "MaxScorePicker": "router_core.pickers.max_score",
    "MetricsParseError": "router_core.state.parse",
    "MetricsScraper": "router_core.state.scraper",
    "MiniLMEncoder": "router_core.intents.minilm",
    "OpenApi": "router_core.gateway.openapi",
    "ParseErrorsJson": "router_core.gateway.errors",
    "ParseErrorsQuiet": "router_core.gateway.errors",
    "PolicyGate": "router_core.gateway.policy_gate",
    "ProbeSource": "router_core.gateway.probe_source",
    "QualityScorer": "router_core.scorers.quality",
    "RedisShared": "router_core.shared.redis_shared",
    "RuleMatch": "router_core.rules.ir:Match",
    "RuleSet": "router_core.rules.ir",
    "ScrapeResult": "router_core.state.scrape_round",
    "SharedCollector": "router_core.shared.wiring",
    "VerdictFollower": "router_core.gateway.probe_source",
    "WorkerPeers": "router_core.gateway.peers",
    "add_worker_metrics": "router_core.gateway.ops_routes",
    "analyse_request": "router_core.decide.analysis",
    "append_examples": "router_core.intents",
    "arm_config": "router_core.experiments",
    "build_shared": "router_core.shared.wiring",
    "cancel_all": "router_core.aio",
    "case_view": "router_core.rules.cases:view_of",
    "classify_intent": "router_core.intents.rules",
    "compile_policy": "router_core.rules.load",
    "decode_round": "router_core.state.scrape_round",
    "embedder_missing": "router_core.intents.embedding",
    "encode_round": "router_core.state.scrape_round",
    "explain_case": "router_core.rules.cases:explain",
    "keys_from_env": "router_core.gateway.auth",
    "load_rules": "router_core.rules.load:load_policy",
    "open_notice": "router_core.gateway.auth",
    "parse_engine_metrics": "router_core.state.parse",
    "probe_feed_body": "router_core.gateway.probe_source:feed_body",
    "read_config": "router_core.config_file",
    "run_cases": "router_core.rules.cases",
    "upstream_keys": "router_core.gateway.auth",
    "tie_key": "router_core.pickers._tiebreak",
}

__all__ = [
    "AUTO_MODEL",
    "DECAYING_GAUGES",
    "AttemptsExhausted",
    "Candidate",
    "CaseResult",
    "CentroidBaseline",
    "CostScorer",
    "Decision",
    "DecisionContext",
    "Difference",
    "Gateway",
    "IntentClassifier",
    "InvalidRequest",
    "MaxScorePicker",
    "MetricsParseError",
    "MetricsScraper",
    "MiniLMEncoder",
    "NoFeasibleInstance",
    "NotReplayable",
    "OpenApi",
    "ParseErrorsJson",
    "ParseErrorsQuiet",
    "PluginConfigError",
    "PluginError",
    "PluginRegistry",
    "Policy",
    "PolicyError",
    "PolicyGate",
    "Prepared",
    "ProbeSource",
    "ProfileError",
    "QualityScorer",
    "QualitySnapshot",
    "QualityTable",
    "Ranked",
    "RedisShared",
    "Replay",
    "Router",
    "RoutingError",
    "RuleMatch",
    "RuleSet",
    "Scored",
    "ScrapeResult",
    "SharedCollector",
    "UnknownModel",
    "UnknownPluginType",
    "VerdictFollower",
    "WorkerPeers",
    "add_worker_metrics",
    "analyse_request",
    "append_examples",
    "arm_config",
    "build_policy",
    "build_router",
    "build_shared",
    "builtin_registry",
    "cancel_all",
    "case_view",
    "classify_intent",
    "compile_policy",
    "decode_round",
    "embedder_missing",
    "encode_round",
    "expected_tokens",
    "explain_case",
    "first_difference",
    "from_document",
    "keys_from_env",
    "load_rules",
    "open_notice",
    "parse_engine_metrics",
    "policy_hash",
    "predicted_latency_ms",
    "probe_feed_body",
    "read_config",
    "redecide",
    "register_builtin",
    "replay",
    "route_of",
    "rule_of",
    "run_cases",
    "settled",
    "tie_key",
    "upstream_keys",
]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
