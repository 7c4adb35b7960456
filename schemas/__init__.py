"""RouteLens data contract: pydantic v2 models and what derives from them.

Only third-party libraries are imported here; no other RouteLens room.
"""

from schemas.common import (
    AttemptStatus,
    Language,
    OutcomeStatus,
    ProbeKind,
    ProbeVerdict,
    RoutingMode,
    StepKind,
)
from schemas.config import ConstraintSpec, RouteLensConfig
from schemas.errors import ConfigError, RoutelensError
from schemas.feedback import Feedback
from schemas.fleet import CostSpec, InstanceSnapshot, InstanceSpec, LatchState
from schemas.hashing import normalize_query, query_hash
from schemas.probe import ProbeResult, ProbeStatus
from schemas.records import QuarantinedRecord, RouterEvent
from schemas.trace import (
    Attempt,
    CandidateEval,
    DecisionStep,
    DecisionTrace,
    Outcome,
    RequestFeatures,
    ScoreWeight,
    ShadowDecision,
    Violation,
)
from schemas.version import SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "Attempt",
    "AttemptStatus",
    "CandidateEval",
    "ConfigError",
    "ConstraintSpec",
    "CostSpec",
    "DecisionStep",
    "DecisionTrace",
    "Feedback",
    "InstanceSnapshot",
    "InstanceSpec",
    "LatchState",
    "Language",
    "Outcome",
    "OutcomeStatus",
    "ProbeKind",
    "ProbeResult",
    "ProbeStatus",
    "ProbeVerdict",
    "QuarantinedRecord",
    "RequestFeatures",
    "RouteLensConfig",
    "RouterEvent",
    "RoutelensError",
    "RoutingMode",
    "ScoreWeight",
    "ShadowDecision",
    "StepKind",
    "Violation",
    "normalize_query",
    "query_hash",
]
