"""``GET /v1/analytics/compare`` without ``shares``: the store does not know the design, so 50/50 is assumed and said.

An audit asked a gateway running a 70/30 experiment for ``compare?a=aa-1&b=aa-2&by=arm`` and got
``shares [0.5, 0.5]``, ``srm_flag true``, ``srm_p 5.8e-11``: a mismatch of a design the store
never had (the arms' shares are the gateway's configuration; the app and the CLI pass them).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from ingest import DuckDBTraceStore
from tests.ingest.experiments.experiment_data import END, T0, experiment
from tests.ingest.test_trace_store import served

WINDOW = {"start": T0.isoformat(), "end": END.isoformat()}


def _get(url: str, **params: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/v1/analytics/compare?{urlencode({**WINDOW, **params})}", timeout=30) as resp:
        data = json.loads(resp.read())
    assert isinstance(data, dict)
    return data


def test_without_shares_the_split_is_assumed_even_and_not_flagged(tmp_path: Path) -> None:
    store = DuckDBTraceStore(tmp_path / "seventy-thirty.duckdb")
    traces, feedback = experiment(700, 300)
    store.write_records(traces)
    store.write_records(feedback)
    try:
        with served(store, tmp_path / "spool") as url:
            assumed = _get(url, a="a", b="b", by="arm")
            designed = _get(url, a="a", b="b", by="arm", shares="0.7,0.3")
            even = _get(url, a="v2.3", b="v2.4", by="version", shares="0.5,0.5")
    finally:
        store.close()
    assert (assumed["n_a"], assumed["n_b"], assumed["shares"]) == (700, 300, [0.5, 0.5])
    assert assumed["srm_flag"] is False and assumed["srm_p"] < 1e-6  # the p-value against 50/50, not a flag
    assert assumed["verdict"].startswith("designed shares unknown, assumed 50/50: the split (700 / 300) is not "
                                         "checked against a design. ")
    assert "SAMPLE RATIO MISMATCH" not in assumed["verdict"]
    assert designed["shares"] == [0.7, 0.3] and designed["srm_flag"] is False and designed["srm_p"] > 0.01
    assert "unknown" not in designed["verdict"]
    assert even["srm_flag"] is True and even["verdict"].startswith("SAMPLE RATIO MISMATCH")  # a design given: checked
    assert assumed["srm_p"] == even["srm_p"]  # the same split against the same 50/50
