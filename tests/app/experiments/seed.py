"""Trace files for the replay tests: traces the real router decided, stored through the real sink."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from bench.replay_traces import T0, RouterTraceFactory, fleet_config
from ingest import DuckDBTraceStore
from ingest.codec.encoder import Encoder
from ingest.record_sink import batch_of
from schemas.config import RouteLensConfig
from schemas.trace import DecisionTrace

__all__ = ["T0", "decided", "policy_yaml", "store_traces"]

# State-only scoring: a candidate's terms do not depend on which others are feasible (the relative
# cost term does), so banning one model leaves every other decision as it was.
STATE_ONLY = {"preset": "seed-instance-score"}


def decided(n: int, config: RouteLensConfig | None = None, seed: int = 7, **kw: Any) -> list[DecisionTrace]:
    """``n`` traces the router decided under ``config`` (default: the bench fleet, state-only scoring)."""
    config = config or fleet_config(scoring=STATE_ONLY)
    return list(RouterTraceFactory(config, seed, **kw).traces(n))


def store_traces(path: Path, traces: Sequence[DecisionTrace], *, detail_share: float = 1.0) -> Path:
    """Write ``traces`` into the DuckDB file ``path`` through the sink (``detail_share`` as the emitter's)."""
    store = DuckDBTraceStore(path)
    enc = Encoder(detail_share=detail_share)
    store.write(store.prepare(batch_of([item for t in traces for item in enc.encode(t)])))
    store.close()
    return path


def policy_yaml(path: Path, config: RouteLensConfig) -> Path:
    """Write ``config`` as a routelens.yaml."""
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_none=True)), encoding="utf-8")
    return path
